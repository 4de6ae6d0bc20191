//! Sending a notification only where it may go: a resolver that only ever hands the HTTP
//! client addresses it checked, and the checks of an address written in a URL or an e-mail
//! server's name. What may be reached is `crate::config::networks`'s rule.
//!
//! Why resolve-then-check inside the resolver: a name checked once and resolved again when
//! connecting could be answered differently the second time (DNS rebinding). The webhook
//! client's resolver ([`CheckedResolver`]) resolves, drops every refused address and gives the
//! client only the ones it kept, so the connection goes to a checked address; an address
//! written in the URL is checked before the request ([`check_url`]). E-mail connects to the
//! address it checked, by number ([`resolve_checked`]).

use crate::config::networks::{AllowList, Refused};
use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

/// Resolves `host` and keeps the addresses `allow` accepts; refused when none is left.
pub(crate) async fn resolve_checked(
    host: &str,
    port: u16,
    allow: &AllowList,
) -> Result<Vec<SocketAddr>, Refused> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let found: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|_| Refused::NoAddress)?
            .collect(),
    };
    if found.is_empty() {
        return Err(Refused::NoAddress);
    }
    let kept: Vec<SocketAddr> = found
        .into_iter()
        .filter(|a| allow.check(a.ip()).is_ok())
        .collect();
    if kept.is_empty() {
        Err(Refused::NotAllowed)
    } else {
        Ok(kept)
    }
}

/// An address written in `url` (no name to resolve) checked now; a name is checked by
/// [`CheckedResolver`] when the client connects.
pub(crate) fn check_url(url: &reqwest::Url, allow: &AllowList) -> Result<(), Refused> {
    let host = url.host_str().ok_or(Refused::NoAddress)?;
    match host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        Ok(ip) => allow.check(ip),
        Err(_) => Ok(()),
    }
}

/// The webhook client's resolver: resolves a name, keeps only allowed addresses, and hands
/// the client exactly those (so it connects to what was checked).
#[derive(Debug, Clone)]
pub(crate) struct CheckedResolver {
    pub(crate) allow: AllowList,
}

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let kept = resolve_checked(&host, 0, &allow).await?;
            let addrs: reqwest::dns::Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

impl CheckedResolver {
    pub(crate) fn shared(allow: AllowList) -> Arc<CheckedResolver> {
        Arc::new(CheckedResolver { allow })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_is_resolved_then_checked_and_only_kept_addresses_come_back() {
        let none = AllowList::default();
        assert_eq!(
            resolve_checked("localhost", 80, &none).await,
            Err(Refused::NotAllowed)
        );
        let allow = AllowList::of(&["127.0.0.0/8", "::1"]);
        let kept = resolve_checked("localhost", 80, &allow).await.unwrap();
        assert!(
            kept.iter().all(|a| a.ip().is_loopback() && a.port() == 80),
            "{kept:?}"
        );
        assert_eq!(
            resolve_checked("169.254.169.254", 80, &allow).await,
            Err(Refused::NotAllowed)
        );
    }

    #[test]
    fn an_address_in_the_url_is_checked_before_any_request() {
        let none = AllowList::default();
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert_eq!(
            check_url(&url("http://169.254.169.254/latest/meta-data"), &none),
            Err(Refused::NotAllowed)
        );
        assert_eq!(
            check_url(&url("http://[::1]:8080/"), &none),
            Err(Refused::NotAllowed)
        );
        assert_eq!(check_url(&url("https://hooks.example.com/"), &none), Ok(()));
    }
}
