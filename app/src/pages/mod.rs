//! One module per route.

pub mod audit;
pub mod home;
pub mod login;
pub mod not_found;
pub mod notifications;
pub mod profile;
pub mod profiles;
pub mod route;
