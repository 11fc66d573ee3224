//! OCM placement scheduling (being written).
use super::{Fleet, PlacementSchedule, Previous};
use crate::catalog::Catalog;

pub fn schedule_all(
    _cat: &Catalog,
    _fleet: &Fleet,
    _previous: &Previous,
    _now_unix: i64,
) -> Vec<PlacementSchedule> {
    Vec::new()
}

pub fn placement_decisions(_result: &PlacementSchedule) -> Vec<serde_json::Value> {
    Vec::new()
}
