//! The typed vocabulary of a run's axes: arms, layouts and floor items, with their names,
//! their order and their behaviour.

pub mod arm;
pub mod family;
pub mod floor_item;
pub mod layout;

pub use arm::Arm;
pub use family::Family;
pub use floor_item::FloorItem;
pub use layout::Layout;
