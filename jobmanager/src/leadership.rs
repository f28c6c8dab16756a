//! Leader election among JobManagers that share a storage root: a lease kept in a
//! [`Register`] under `{root}/_leader/`, without any system besides the object store.
//!
//! The leader renews the lease (writes the next version of the register) every
//! `renew_interval`. A standby reads the register as often; it takes over when the
//! version it sees has not changed for `duration` by its own monotonic clock (so clocks
//! that disagree between machines do not matter), by writing the next version with the
//! next term. Only one contender can write a version, so a term has one leader. A leader
//! whose renewal is refused (a standby wrote first) or that could not renew for
//! `duration - renew_interval` (it may have been paused or cut off) has lost the lease:
//! it must stop acting. What it could still write when resumed is refused by the commit
//! logs of the jobs, which the new leader's term fences (DESIGN §6).

use std::time::{Duration, Instant};

use bytes::Bytes;
use eddy_common::object_storage::StorageLocation;
use eddy_common::register::{Register, Versioned};
use eddy_common::{EddyError, Result};
use serde::{Deserialize, Serialize};

/// The lease as stored: who leads, in which term, and where to reach it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The term; grows by one at each change of leader (the fencing token).
    pub term: u64,
    /// The leader's id (unique per process).
    pub holder: String,
    /// Its gRPC address, for TaskManagers and clients.
    pub address: String,
    /// Its HTTP address, if it serves one.
    #[serde(default)]
    pub http_address: Option<String>,
    /// When the term began, in milliseconds since the epoch (for `eddy status`).
    pub since_ms: i64,
}

/// How long a lease lasts and how often it is renewed
/// (`high-availability.lease.duration`, `high-availability.lease.renew-interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSettings {
    /// How long a lease not renewed stays valid.
    pub duration: Duration,
    /// How often the leader renews it and standbys look at it.
    pub renew_interval: Duration,
}

impl LeaseSettings {
    /// Flink's defaults: a 10 s lease renewed every 2 s.
    pub const DEFAULT: LeaseSettings = LeaseSettings {
        duration: Duration::from_secs(10),
        renew_interval: Duration::from_secs(2),
    };
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings::DEFAULT
    }
}

/// Why a leader stopped leading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LostLease {
    /// Another JobManager wrote the lease: it leads now.
    #[error("the lease of term {term} was taken over (by {holder})")]
    TakenOver {
        /// Our term.
        term: u64,
        /// Who wrote the lease after us.
        holder: String,
    },
    /// Renewals failed for too long: a standby may have taken over.
    #[error("the lease of term {term} could not be renewed for {silent:?}: {error}")]
    Expired {
        /// Our term.
        term: u64,
        /// How long renewals failed.
        silent: Duration,
        /// The last renewal's error.
        error: String,
    },
}

/// One JobManager's part in the election.
#[derive(Debug, Clone)]
pub struct Leadership {
    register: Register,
    settings: LeaseSettings,
    /// What this JobManager writes when it leads (its term set when it wins).
    candidate: Lease,
}

/// The lease this JobManager holds, and the register version it wrote last.
#[derive(Debug, Clone)]
pub struct Held {
    /// The lease.
    pub lease: Lease,
    version: u64,
}

fn decode(found: &Versioned) -> Result<Lease> {
    serde_json::from_slice(&found.value).map_err(|e| {
        EddyError::Snapshot(format!(
            "the leader lease (version {}) is unreadable: {e}",
            found.version
        ))
    })
}

fn encode(lease: &Lease) -> Bytes {
    Bytes::from(serde_json::to_vec(lease).expect("a lease serializes"))
}

impl Leadership {
    /// A contender under `root` that would lead as `holder` at `address`.
    pub fn new(
        root: &StorageLocation,
        settings: LeaseSettings,
        holder: String,
        address: String,
        http_address: Option<String>,
    ) -> Self {
        let dir = root.path.clone().join("_leader");
        Leadership {
            register: Register::new(root.store.clone(), dir),
            settings,
            candidate: Lease {
                term: 0,
                holder,
                address,
                http_address,
                since_ms: 0,
            },
        }
    }

    /// The lease as it stands, if anyone ever led.
    pub async fn current(&self) -> Result<Option<Lease>> {
        self.register.read().await?.as_ref().map(decode).transpose()
    }

    /// Waits until this JobManager leads: at once when nobody ever did, else once the
    /// lease went unrenewed for its duration. Storage errors are retried.
    pub async fn acquire(&self) -> Held {
        // The version last seen, and since when it has not changed.
        let mut watched: Option<(u64, Instant)> = None;
        let mut announced = None;
        loop {
            match self.try_acquire(&mut watched, &mut announced).await {
                Ok(Some(held)) => return held,
                Ok(None) => {}
                Err(error) => tracing::warn!(%error, "reading the leader lease failed"),
            }
            tokio::time::sleep(self.settings.renew_interval).await;
        }
    }

    /// One look at the lease: takes it when it is free or expired.
    async fn try_acquire(
        &self,
        watched: &mut Option<(u64, Instant)>,
        announced: &mut Option<u64>,
    ) -> Result<Option<Held>> {
        let found = self.register.read().await?;
        let (version, previous) = match &found {
            None => (0, None),
            Some(found) => (found.version, Some(decode(found)?)),
        };
        if let Some(previous) = &previous {
            let unchanged_since = match *watched {
                Some((seen, since)) if seen == version => since,
                _ => {
                    *watched = Some((version, Instant::now()));
                    if *announced != Some(previous.term) {
                        tracing::info!(leader = %previous.holder, address = %previous.address, term = previous.term, "standing by: another jobmanager leads");
                        *announced = Some(previous.term);
                    }
                    return Ok(None);
                }
            };
            if unchanged_since.elapsed() < self.settings.duration {
                return Ok(None);
            }
        }
        let lease = Lease {
            term: previous.as_ref().map_or(1, |p| p.term + 1),
            since_ms: eddy_common::event::wall_clock(),
            ..self.candidate.clone()
        };
        if !self.register.write(version, encode(&lease)).await? {
            // Another contender (or the leader, renewing late) wrote first.
            *watched = None;
            return Ok(None);
        }
        tracing::info!(
            term = lease.term,
            address = %lease.address,
            previous = previous.map(|p| p.holder),
            "this jobmanager leads"
        );
        Ok(Some(Held {
            lease,
            version: version + 1,
        }))
    }

    /// Renews `held` every renew interval for as long as it can; returns why it stopped.
    pub async fn hold(&self, mut held: Held) -> LostLease {
        let term = held.lease.term;
        let mut renewed = Instant::now();
        // Past this, a standby that saw the last renewal may take over soon.
        let limit = self
            .settings
            .duration
            .saturating_sub(self.settings.renew_interval);
        loop {
            tokio::time::sleep(self.settings.renew_interval).await;
            let attempt = Instant::now();
            match self.register.write(held.version, encode(&held.lease)).await {
                Ok(true) => {
                    held.version += 1;
                    renewed = attempt;
                }
                Ok(false) => {
                    let holder = match self.current().await {
                        Ok(Some(lease)) => lease.holder,
                        _ => "another jobmanager".into(),
                    };
                    return LostLease::TakenOver { term, holder };
                }
                Err(error) if renewed.elapsed() >= limit => {
                    return LostLease::Expired {
                        term,
                        silent: renewed.elapsed(),
                        error: error.to_string(),
                    };
                }
                Err(error) => tracing::warn!(%error, term, "renewing the leader lease failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use eddy_common::object_storage::resolve;

    fn contender(root: &StorageLocation, name: &str) -> Leadership {
        let settings = LeaseSettings {
            duration: Duration::from_millis(600),
            renew_interval: Duration::from_millis(100),
        };
        Leadership::new(root, settings, name.into(), format!("http://{name}"), None)
    }

    fn root(name: &str) -> (StorageLocation, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("eddy-lease-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        (resolve(dir.to_str().unwrap(), &[]).unwrap(), dir)
    }

    #[tokio::test]
    async fn the_first_contender_leads_and_a_standby_waits_while_it_renews() {
        let (root, dir) = root("standby");
        let (a, b) = (contender(&root, "a"), contender(&root, "b"));
        let held = a.acquire().await;
        assert_eq!((held.lease.term, held.lease.holder.as_str()), (1, "a"));
        let holding = tokio::spawn(async move { a.hold(held).await });
        let standby = tokio::time::timeout(Duration::from_secs(2), b.acquire()).await;
        assert!(standby.is_err(), "b must not lead while a renews");
        holding.abort();
        let held = tokio::time::timeout(Duration::from_secs(5), b.acquire())
            .await
            .expect("b takes over once a stops renewing");
        assert_eq!((held.lease.term, held.lease.holder.as_str()), (2, "b"));
        let current = b.current().await.unwrap().unwrap();
        assert_eq!((current.term, current.address.as_str()), (2, "http://b"));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_leader_that_was_taken_over_learns_it_at_its_next_renewal() {
        let (root, dir) = root("taken");
        let (a, b) = (contender(&root, "a"), contender(&root, "b"));
        let held_a = a.acquire().await;
        // a is paused (does not renew); b takes over.
        let held_b = tokio::time::timeout(Duration::from_secs(5), b.acquire())
            .await
            .unwrap();
        assert_eq!(held_b.lease.term, 2);
        let lost = a.hold(held_a).await;
        assert_eq!(
            lost,
            LostLease::TakenOver {
                term: 1,
                holder: "b".into()
            }
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn of_many_contenders_each_term_has_one_leader() {
        let (root, dir) = root("many");
        let contenders: Vec<Leadership> =
            (0..5).map(|i| contender(&root, &format!("c{i}"))).collect();
        for term in 1..=3 {
            let racing = contenders.iter().map(|c| {
                let c = c.clone();
                Box::pin(async move { c.acquire().await })
            });
            let (won, _, others) = futures::future::select_all(racing).await;
            drop(others);
            assert_eq!(won.lease.term, term);
            let current = contenders[0].current().await.unwrap().unwrap();
            assert_eq!(current, won.lease, "the lease names the one winner");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
