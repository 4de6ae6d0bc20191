//! E-mail over SMTP (`lettre`): STARTTLS (required, never skipped) or TLS from the first byte,
//! certificates checked against the system's roots for the configured host name; no TLS only
//! to a relay on this machine. Credentials come from the variables the channel names, read
//! when the attempt is made.
//!
//! The mail server's address is checked like a webhook receiver's ([`super::address`]): the
//! host is resolved, the address checked, and the connection made to that address by number,
//! while TLS still verifies the configured host name.

use super::{address::resolve_checked, DeliveryError};
use crate::{
    config::{
        networks::AllowList,
        notify::{EmailConfig, SmtpSecurity},
    },
    engine::outbox::Body,
};
use lettre::{
    message::{header::ContentType, Mailbox},
    transport::smtp::{
        authentication::Credentials,
        client::{Tls, TlsParameters},
    },
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};
use std::time::Duration;

/// One attempt: the event's message to every recipient of the channel.
pub(crate) async fn send(
    mail: &EmailConfig,
    timeout: Duration,
    allow: &AllowList,
    body: &Body,
) -> Result<(), DeliveryError> {
    let message = message(mail, body)?;
    let addrs = tokio::time::timeout(timeout, resolve_checked(&mail.host, mail.port, allow))
        .await
        .map_err(|_| DeliveryError::Timeout)??;
    let host = mail.host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let tls = match mail.security {
        SmtpSecurity::None => Tls::None,
        SmtpSecurity::Starttls => Tls::Required(tls_parameters(&host)?),
        SmtpSecurity::Tls => Tls::Wrapper(tls_parameters(&host)?),
    };
    let credentials = match (&mail.username_env, &mail.password_env) {
        (Some(user), Some(password)) => {
            let read = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
            match (read(user), read(password)) {
                (Some(u), Some(p)) => Some(Credentials::new(u, p)),
                _ => return Err(DeliveryError::Secret("the SMTP credential variables are not set")),
            }
        }
        _ => None,
    };
    let mut last = DeliveryError::Connect;
    for addr in addrs {
        let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(addr.ip().to_string())
            .port(addr.port())
            .tls(tls.clone())
            .timeout(Some(timeout));
        if let Some(c) = &credentials {
            transport = transport.credentials(c.clone());
        }
        let transport: AsyncSmtpTransport<Tokio1Executor> = transport.build();
        let sent = tokio::time::timeout(timeout, transport.send(message.clone())).await;
        match sent {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) if e.is_permanent() => return Err(DeliveryError::MailRefused),
            Ok(Err(e)) if e.is_transient() => last = DeliveryError::MailRefused,
            Ok(Err(e)) if e.is_timeout() => last = DeliveryError::Timeout,
            Ok(Err(e)) if e.is_tls() => last = DeliveryError::Tls,
            Ok(Err(_)) => last = DeliveryError::Connect,
            Err(_) => last = DeliveryError::Timeout,
        }
    }
    Err(last)
}

fn tls_parameters(host: &str) -> Result<TlsParameters, DeliveryError> {
    TlsParameters::new(host.to_owned()).map_err(|_| DeliveryError::Transport)
}

/// The message: from, every recipient, the subject and the plain-text body.
fn message(mail: &EmailConfig, body: &Body) -> Result<Message, DeliveryError> {
    // The configuration was checked when it was loaded; a failure here is a refused message.
    let from: Mailbox = mail.from.parse().map_err(|_| DeliveryError::MailRefused)?;
    let mut builder = Message::builder()
        .from(from)
        .subject(super::message::subject(body))
        .header(ContentType::TEXT_PLAIN);
    for to in &mail.to {
        builder = builder.to(to.parse().map_err(|_| DeliveryError::MailRefused)?);
    }
    builder
        .body(super::message::email_text(body))
        .map_err(|_| DeliveryError::MailRefused)
}
