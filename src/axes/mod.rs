//! The typed vocabulary of a run's axes: arms, their read paths, layouts and floor items,
//! with their names, their order and their behaviour.

pub mod arm;
pub mod drafter;
pub mod family;
pub mod floor_item;
pub mod layout;
pub mod read_path;

pub use arm::Arm;
pub use drafter::Drafter;
pub use family::Family;
pub use floor_item::FloorItem;
pub use layout::Layout;
pub use read_path::ReadPath;
