//! Pieces shared by several pages.

pub mod class_policy;
pub mod controls;
pub mod copy;
pub mod disclosure;
pub mod dispatcher_choice;
pub mod live;
pub mod nav;
pub mod notification_rules;
pub mod notify_bell;
pub mod profile_editor;
pub mod route_view;
pub mod status;
pub mod time;
pub mod timeline;
pub mod transcript;
pub mod try_error;
