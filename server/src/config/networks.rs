//! Which networks a notification receiver may be on: the operator's `[notify] allow_networks`
//! and the rules every address is judged by (the checks themselves, with no I/O; resolving a
//! receiver's name and connecting is `crate::notify::address`'s).
//!
//! A receiver's address must be public unless the operator allowed its network: loopback,
//! private, shared (CGNAT), link-local (where cloud metadata services answer,
//! `169.254.169.254`), unique-local, multicast, documentation and reserved ranges are refused by
//! default, and so are IPv4 addresses written as IPv6 (`::ffff:a.b.c.d`, `64:ff9b::a.b.c.d`),
//! judged as the IPv4 address they carry.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Non-public networks the operator allows receivers on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<IpNet>);

/// Why an address is refused (without the address: it is the operator's configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("[NT2001] the receiver's address is not public and its network is not allowed (notify.allow_networks)")]
    NotAllowed,
    #[error("[NT2002] the receiver's name has no address")]
    NoAddress,
}

impl AllowList {
    /// Parses `allow_networks` (`10.0.0.0/8`, `fd00::/8`, or one address); problems named by
    /// position.
    pub(crate) fn parse(entries: &[String], problems: &mut Vec<String>) -> AllowList {
        let mut nets = Vec::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            let parsed = e
                .parse::<IpNet>()
                .ok()
                .or_else(|| e.parse::<IpAddr>().ok().map(IpNet::from));
            match parsed {
                Some(n) => nets.push(n.trunc()),
                None => problems.push(format!(
                    "notify.allow_networks[{i}]: a network (10.0.0.0/8, fd00::/8) or an address"
                )),
            }
        }
        AllowList(nets)
    }

    /// Allows these networks (tests and benchmarks).
    pub fn of(nets: &[&str]) -> AllowList {
        let mut problems = Vec::new();
        let owned: Vec<String> = nets.iter().map(|s| (*s).to_owned()).collect();
        let list = AllowList::parse(&owned, &mut problems);
        debug_assert!(problems.is_empty(), "{problems:?}");
        list
    }

    /// Whether a receiver may be at `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refused> {
        let ip = canonical(ip);
        if is_public(ip) || self.0.iter().any(|n| n.contains(&ip)) {
            Ok(())
        } else {
            Err(Refused::NotAllowed)
        }
    }
}

/// An IPv4 address carried in IPv6 (mapped, or the NAT64 well-known prefix) as the IPv4
/// address; anything else as it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let nat64 = Ipv6Net::new(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96).ok();
            if nat64.is_some_and(|n| n.contains(&v6)) {
                let o = v6.octets();
                return IpAddr::V4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            IpAddr::V6(v6)
        }
        v4 => v4,
    }
}

/// Networks no receiver is on unless allowed.
const V4_REFUSED: [(Ipv4Addr, u8); 16] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared (CGNAT; a metadata service answers here too)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local (cloud metadata at 169.254.169.254)
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // 6to4 relay
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, broadcast
    (Ipv4Addr::new(255, 255, 255, 255), 32),
];

const V6_REFUSED: [(Ipv6Addr, u8); 8] = [
    (Ipv6Addr::UNSPECIFIED, 128),
    (Ipv6Addr::LOCALHOST, 128),
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64), // discard
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16), // 6to4 (carries any IPv4 address)
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7), // unique local (metadata fd00:ec2::254)
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10), // link-local
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8), // multicast
];

fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !V4_REFUSED
            .iter()
            .any(|(net, len)| Ipv4Net::new(*net, *len).is_ok_and(|n| n.contains(&v4))),
        IpAddr::V6(v6) => {
            // Everything outside global unicast (2000::/3) is not a public receiver.
            let global =
                Ipv6Net::new(Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3).is_ok_and(|n| n.contains(&v6));
            global
                && !V6_REFUSED
                    .iter()
                    .any(|(net, len)| Ipv6Net::new(*net, *len).is_ok_and(|n| n.contains(&v6)))
        }
    }
}

/// Whether `host` is this machine: `localhost` or a loopback address (e-mail without TLS is
/// allowed only there).
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| canonical(ip).is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_public_addresses_are_refused_unless_their_network_is_allowed() {
        let none = AllowList::default();
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
        ] {
            assert_eq!(none.check(ip(refused)), Err(Refused::NotAllowed), "{refused}");
        }
        for public in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert_eq!(none.check(ip(public)), Ok(()), "{public}");
        }
        let allow = AllowList::of(&["127.0.0.0/8", "10.20.0.0/16", "fd12::1"]);
        assert_eq!(allow.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(allow.check(ip("::ffff:127.0.0.1")), Ok(()));
        assert_eq!(allow.check(ip("10.20.3.4")), Ok(()));
        assert_eq!(allow.check(ip("10.21.3.4")), Err(Refused::NotAllowed));
        assert_eq!(allow.check(ip("fd12::1")), Ok(()));
        assert_eq!(allow.check(ip("169.254.169.254")), Err(Refused::NotAllowed));
    }

    #[test]
    fn bad_allow_entries_are_named_by_position() {
        let mut problems = Vec::new();
        AllowList::parse(
            &["10.0.0.0/8".into(), "ten".into(), "10.0.0.0/33".into()],
            &mut problems,
        );
        assert_eq!(
            problems
                .iter()
                .map(|p| p.split(':').next().unwrap())
                .collect::<Vec<_>>(),
            ["notify.allow_networks[1]", "notify.allow_networks[2]"]
        );
    }

    #[test]
    fn only_localhost_and_loopback_addresses_are_this_machine() {
        assert!(
            is_loopback_host("localhost")
                && is_loopback_host("[::1]")
                && is_loopback_host("127.0.0.1")
                && !is_loopback_host("smtp.example.com")
        );
    }
}
