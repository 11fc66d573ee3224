//! The edge towards member clusters: reaching each member through a kubeconfig context
//! ([`connect`]) and reading its live inventory ([`inventory`]). Credentials never live in the repository: a member is reached
//! through the kubeconfig context of the same name, or the one its annotation
//! `gitfleet.io/kubeconfig-context` names.

pub mod connect;
pub mod inventory;
pub mod kubeconfig;
pub mod retry;

pub use connect::{
    connect_watching, connection, member_targets, Connection, Kinds, MemberError, MemberTarget,
};
pub use kubeconfig::read_kubeconfig;
