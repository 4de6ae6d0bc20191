//! Notifications for the signed-in person: the in-app list (and marking it read), the
//! deliveries to the server's configured channels (dead ones are what people look for), and the
//! channels a profile's rules may name. Read and mark-read only: channels are configured on the
//! server, rules are part of the profile.

use crate::error::AppError;
use leptos::{prelude::*, server_fn::codec::Json};
use policy::notify::{ChannelOption, DeliveryStatus, DeliveryView, NotificationPage};

/// The signed-in person's notifications, newest first (before `before`, a `seq`, when given),
/// and how many are unread.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_notifications(before: Option<i64>) -> Result<NotificationPage, AppError> {
    Ok(crate::backend::backend()?.notifications(before).await?)
}

/// Marks the signed-in person's notifications read up to `through_seq`; how many stay unread.
#[server(prefix = "/api/ui", input = Json)]
pub async fn mark_notifications_read(through_seq: u64) -> Result<u64, AppError> {
    Ok(crate::backend::backend()?
        .mark_notifications_read(through_seq)
        .await?)
}

/// Deliveries to the configured channels in `status` (all when `None`), newest first.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_deliveries(status: Option<DeliveryStatus>) -> Result<Vec<DeliveryView>, AppError> {
    Ok(crate::backend::backend()?.deliveries(status).await?)
}

/// The channels a notification rule may name now.
#[server(prefix = "/api/ui", input = Json)]
pub async fn list_channels() -> Result<Vec<ChannelOption>, AppError> {
    Ok(crate::backend::backend()?.list_channels().await?)
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;
    use crate::api::{
        fake::{with_backend, Call, FakeBackend},
        profiles::tests::port_errors,
    };

    #[test]
    fn each_function_sends_its_arguments_to_the_port_and_returns_its_answer() {
        let fake = FakeBackend::default();
        assert_eq!(
            with_backend(&fake, list_notifications(Some(9))),
            Ok(FakeBackend::notifications())
        );
        assert_eq!(with_backend(&fake, mark_notifications_read(3)), Ok(0));
        assert_eq!(
            with_backend(&fake, list_deliveries(Some(DeliveryStatus::Dead))),
            Ok(vec![])
        );
        assert_eq!(with_backend(&fake, list_channels()).map(|c| c.len()), Ok(1));
        assert_eq!(
            fake.calls(),
            vec![
                Call::Notifications(Some(9)),
                Call::MarkNotificationsRead(3),
                Call::Deliveries(Some(DeliveryStatus::Dead)),
                Call::ListChannels,
            ]
        );
    }

    #[test]
    fn every_port_error_reaches_the_page_as_its_wire_error() {
        for (port, wire) in port_errors() {
            let fake = FakeBackend::failing(port.clone());
            assert_eq!(
                with_backend(&fake, list_notifications(None)),
                Err(wire.clone()),
                "after {port:?}"
            );
            assert_eq!(
                with_backend(&fake, mark_notifications_read(1)),
                Err(wire),
                "after {port:?}"
            );
        }
    }
}
