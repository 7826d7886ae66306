//! prep
