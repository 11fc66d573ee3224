//! Telling people what gitfleet did: typed events worked out from what the daemon publishes
//! ([`events`], pure), and the sinks they are delivered to (CloudEvents webhooks, chat, commit
//! statuses on the git host), declared in one configuration file ([`config`]).
//!
//! Delivery ([`deliver`]) is an edge of its own: the daemon offers each published snapshot
//! with `try_send` and never waits; a full queue drops and counts. The events know nothing of
//! sinks, and the sinks nothing of the rollout.

pub mod comment;
pub mod config;
pub mod deliver;
pub mod events;
pub mod sinks;
