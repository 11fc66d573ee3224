//! Shell-style wildcards as OpenSSH reads them in allowed_signers principals (`*`, `?`, and `!`
//! negation in a comma-separated list) and as the approval policy reads stage names.

/// Does `text` match `pattern` (`*` any run of characters, `?` one character)?
pub fn matches(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    // Iterative matching with one backtrack point for the last `*`: linear in practice, no
    // recursion on hostile patterns.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// OpenSSH's `match_pattern_list`: `text` matches the comma-separated `list` when some positive
/// pattern matches and no negated one (`!pattern`) does.
pub fn matches_list(list: &str, text: &str) -> bool {
    let mut positive = false;
    for pattern in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match pattern.strip_prefix('!') {
            Some(negated) if matches(negated, text) => return false,
            Some(_) => {}
            None => positive |= matches(pattern, text),
        }
    }
    positive
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        for (pattern, text, want) in [
            ("prod*", "production", true),
            ("prod*", "staging", false),
            ("*", "", true),
            ("", "", true),
            ("", "a", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("*@example.com", "sre@example.com", true),
            ("*@example.com", "sre@example.org", false),
            ("*a*b", "xaxxb", true),
            ("*a*b", "xaxxbc", false),
            ("canary", "canary", true),
        ] {
            assert_eq!(matches(pattern, text), want, "{pattern:?} vs {text:?}");
        }
    }

    #[test]
    fn lists_with_negation() {
        assert!(matches_list("alice@x,bob@x", "bob@x"));
        assert!(!matches_list("alice@x,bob@x", "carol@x"));
        assert!(matches_list("*@x,!mallory@x", "alice@x"));
        assert!(!matches_list("*@x,!mallory@x", "mallory@x"));
        // Only negations: nothing matches, as in OpenSSH.
        assert!(!matches_list("!mallory@x", "alice@x"));
    }
}
