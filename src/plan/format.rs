//! How a plan is printed: `text` for terminals, `markdown` for pull-request comments, `json`.

use super::Plan;

pub fn json(plan: &Plan) -> String {
    serde_json::to_string_pretty(plan).expect("plan serialises")
}

pub fn text(plan: &Plan, _color: bool) -> String {
    json(plan)
}

pub fn markdown(plan: &Plan, _max_bytes: usize) -> String {
    format!("```json\n{}\n```\n", json(plan))
}
