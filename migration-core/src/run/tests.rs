use super::*;

#[test]
fn a_recorded_failure_message_is_redacted_and_stays_within_the_limit() {
    let output = format!("{}\npassword=hunter2\nexit 1", "x".repeat(5000));
    let message = recorded_message(&output, 4096);
    assert!(message.len() <= 4096);
    assert!(!message.contains("hunter2"));
    assert!(message.ends_with("[migrate: 1 secret-shaped value(s) redacted]"));
    assert_eq!(recorded_message("plain", 4096), "plain");
}

#[test]
fn the_room_reserved_for_a_message_is_what_encoding_the_largest_one_adds() {
    let mut entry = LedgerEntry::new(EntryState::Failed, crate::Timestamp::from_unix(0));
    entry.reason = Some("r".repeat(MAX_REASON_BYTES));
    entry.message = Some(String::new());
    let empty = entry.encode_compact(Some("c0")).len() as u64;
    for limit in [0, 1, 17, DEFAULT_MESSAGE_LIMIT_BYTES] {
        entry.message = Some("\u{1}".repeat(limit));
        assert_eq!(
            entry.encode_compact(Some("c0")).len() as u64,
            empty + largest_message_bytes(limit),
            "limit {limit}"
        );
        let largest = recorded_message(&"\u{1}".repeat(2 * limit + 100), limit);
        assert!(
            serde_json::to_string(&largest).unwrap().len() as u64 - 2
                <= largest_message_bytes(limit)
        );
    }
}

#[test]
fn cuts_keep_whole_characters_and_the_end_of_the_output() {
    assert_eq!(cut_tail("abcdef", 3), "def");
    assert_eq!(cut_tail("aé", 1), "");
    assert_eq!(cut_tail("short", 10), "short");
    assert_eq!(cut_front("éa", 1), "");
    assert_eq!(cut_front("reason", 3), "rea");
}
