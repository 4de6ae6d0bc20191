//! Pieces shared by several pages.

pub mod disclosure;
pub mod nav;
