//! Versions compared as go-version compares them (Nomad's `version` and `semver` operands),
//! leniently: `5.10.0-28-amd64` is 5.10.0.

/// Numeric parts of a version, as far as they go (`5.10.0-28-amd64` is 5.10.0).
fn version_parts(v: &str) -> Vec<u64> {
    v.trim()
        .trim_start_matches('v')
        .split(['.', '-', '+'])
        .map_while(|p| p.parse().ok())
        .collect()
}

/// Whether `version` meets every comparison of `req` (go-version's syntax: `>= 1.2, < 2`;
/// a bare version is `=`). Lenient as go-version is, where the `semver` crate is strict.
pub fn version_matches(version: &str, req: &str) -> bool {
    let have = version_parts(version);
    if have.is_empty() {
        return false;
    }
    req.split(',').all(|c| {
        let c = c.trim();
        let (op, v) = ["~>", ">=", "<=", "!=", ">", "<", "="]
            .iter()
            .find_map(|op| c.strip_prefix(op).map(|v| (*op, v.trim())))
            .unwrap_or(("=", c));
        let want = version_parts(v);
        let n = have.len().max(want.len());
        let pad = |v: &[u64]| {
            (0..n)
                .map(|i| v.get(i).copied().unwrap_or(0))
                .collect::<Vec<_>>()
        };
        let (a, b) = (pad(&have), pad(&want));
        match op {
            "=" => a == b,
            "!=" => a != b,
            ">" => a > b,
            ">=" => a >= b,
            "<" => a < b,
            "<=" => a <= b,
            // Pessimistic: >= the version, below the next release of its second-last part.
            _ => {
                let mut upper = want.clone();
                if upper.len() > 1 {
                    upper.pop();
                }
                if let Some(last) = upper.last_mut() {
                    *last += 1;
                }
                a >= b && a < pad(&upper)
            }
        }
    })
}
