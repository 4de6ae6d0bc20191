//! This process's name among the replicas of one deployment: the `replica_id` of every JSON log
//! line and of the `recourse_replica_info` metric. Today there is one SQLite process; the name
//! is already there so logs and scrapes of several processes can be told apart (and so a
//! PostgreSQL deployment's replicas can, when it exists).
//!
//! `recourse serve --replica-id` (env `RECOURSE_REPLICA_ID`) sets it; without it the name is
//! `HOSTNAME-PID` (host name from the kernel, cut to fit), which is unique on one machine and,
//! in a container, names the pod. Parsed once: 1 to [`MAX_REPLICA_ID`] characters of ASCII
//! letters, digits, `.`, `_` and `-`, so it is safe in a log field, a label value and a file
//! name, and never needs escaping.

use std::{fmt, str::FromStr};

/// The longest replica id.
pub const MAX_REPLICA_ID: usize = 64;

/// A validated replica id (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicaId(String);

/// Why a replica id was refused (the text is never repeated back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaIdError {
    #[error("[RP1001] a replica id is 1 to {MAX_REPLICA_ID} characters")]
    Length,
    #[error("[RP1002] a replica id holds only ASCII letters, digits, `.`, `_` and `-`")]
    Character,
}

impl ReplicaId {
    /// `HOSTNAME-PID` for this process; `recourse-PID` when the host name is unreadable or holds
    /// characters a replica id cannot.
    pub fn of_this_process() -> ReplicaId {
        let pid = std::process::id();
        let suffix = format!("-{pid}");
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .filter(|h| !h.is_empty() && h.bytes().all(allowed))
            .unwrap_or_else(|| "recourse".to_owned());
        // A pid has at most 10 digits; the host name gives way.
        let room = MAX_REPLICA_ID.saturating_sub(suffix.len());
        let host: String = host.chars().take(room).collect();
        ReplicaId(format!("{host}{suffix}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

impl FromStr for ReplicaId {
    type Err = ReplicaIdError;

    fn from_str(s: &str) -> Result<ReplicaId, ReplicaIdError> {
        if s.is_empty() || s.len() > MAX_REPLICA_ID {
            return Err(ReplicaIdError::Length);
        }
        if !s.bytes().all(allowed) {
            return Err(ReplicaIdError::Character);
        }
        Ok(ReplicaId(s.to_owned()))
    }
}

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_this_hosts_name_and_pid_and_itself_a_valid_id() {
        let id = ReplicaId::of_this_process();
        assert!(id.as_str().ends_with(&format!("-{}", std::process::id())), "{id}");
        assert_eq!(id.as_str().parse::<ReplicaId>(), Ok(id.clone()));
    }

    #[test]
    fn ids_are_bounded_and_plain() {
        assert_eq!(
            "eu-1.a_b".parse::<ReplicaId>().map(|r| r.to_string()),
            Ok("eu-1.a_b".into())
        );
        assert_eq!("".parse::<ReplicaId>(), Err(ReplicaIdError::Length));
        assert_eq!("x".repeat(65).parse::<ReplicaId>(), Err(ReplicaIdError::Length));
        assert!("x".repeat(64).parse::<ReplicaId>().is_ok());
        for bad in ["a b", "a\"b", "ä", "a\nb", "a{b}"] {
            assert_eq!(
                bad.parse::<ReplicaId>(),
                Err(ReplicaIdError::Character),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_refusal_does_not_repeat_the_input() {
        let err = "secret value".parse::<ReplicaId>().unwrap_err().to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
