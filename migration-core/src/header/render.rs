//! Writing a header: the one renderer scaffold, convert and the test
//! fixtures share, so that what they write is what the parser reads.

use std::fmt;

use super::HeaderMarker;

/// The directive lines of a header (no shebang): `tier`, `on-error` and one
/// `requires` line per target, in that order, each `# <marker> key=value`.
/// The tier and policy are anything that prints as one ([`super::Tier`], or
/// a string for a fixture that must not match its directory), so a header
/// written here reads back as written under the same marker.
pub fn render_header(
    marker: &HeaderMarker,
    tier: impl fmt::Display,
    on_error: impl fmt::Display,
    requires: &[&str],
) -> String {
    let mut text = format!("# {marker} tier={tier}\n# {marker} on-error={on_error}\n");
    for target in requires {
        text.push_str(&format!("# {marker} requires={target}\n"));
    }
    text
}
