//! Kubernetes' text formats, read and written as Kubernetes' own tools do: the values gitfleet
//! and its member simulator exchange with people and API servers.
//!
//! - [`yaml`]: YAML read as sigs.k8s.io/yaml reads it (YAML 1.1 scalars, positions for
//!   diagnostics), and written so that it reads back the same;
//! - [`quantity`]: resource quantities (`100m`, `4Gi`);
//! - [`timestamp`]: RFC 3339 times as Kubernetes writes `metav1.Time`.
//!
//! Pure: text in, values out. It knows nothing of gitfleet's objects, nor of the simulator.

pub mod quantity;
pub mod timestamp;
pub mod yaml;
