//! `TokenLimit` and `budget_skill_content` against nagents' `budget_skill_content`.
//!
//! Input: a mode byte choosing how the limit is read (0: one byte, 1 + b, so most contents are
//! cut; 1: two bytes; 2: eight bytes; 3: one byte indexing boundary values), the limit's
//! little-endian bytes, then the content, decoded as UTF-8 with invalid bytes replaced.

#![no_main]

use libfuzzer_sys::fuzz_target;
use skillcat_core::{Skill, TokenLimit, budget_skill_content, estimate_skill_tokens};
use skillcat_fuzz::Input;

const BOUNDARIES: [u64; 8] = [0, 1, 9_999, 10_000, 100_000, 100_001, 1 << 32, u64::MAX];

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let limit = match input.u8() % 4 {
        0 => 1 + input.uint(1),
        1 => input.uint(2),
        2 => input.uint(8),
        _ => BOUNDARIES[usize::from(input.u8() % 8)],
    };
    let content = String::from_utf8_lossy(input.rest());
    let content = content.as_ref();

    // estimate_skill_tokens: (len(content.encode("utf-8")) + 3) // 4
    assert_eq!(estimate_skill_tokens(content), (content.len() as u64).div_ceil(4));

    // validate_skill_token_limit: an int in 1..=100000, whatever way it arrives.
    let token_limit = TokenLimit::new(limit);
    assert_eq!(token_limit.is_ok(), (1..=100_000).contains(&limit), "limit {limit}");
    assert_eq!(limit.to_string().parse::<TokenLimit>(), token_limit);
    assert_eq!(TokenLimit::try_from(limit), token_limit);
    let token_limit = match token_limit {
        Ok(token_limit) => token_limit,
        Err(error) => {
            assert_eq!(error.to_string(), "skill_token_limit must be an integer between 1 and 100000");
            return;
        }
    };
    assert_eq!(u64::from(token_limit.get()), limit);

    let skill = Skill::new("fuzz", "Fuzzed content.", "/s/fuzz/SKILL.md").unwrap();
    let result = budget_skill_content(&skill, content, token_limit);
    assert_eq!(result, budget_skill_content(&skill, content, token_limit), "not deterministic");

    // nagents: encoded[: token_limit * 4].decode("utf-8", errors="ignore")
    let budget = 4 * limit as usize;
    let cut = &content.as_bytes()[..budget.min(content.len())];
    let expected: String = cut.utf8_chunks().map(|chunk| chunk.valid()).collect();
    assert_eq!(result.content, expected);

    // The same contract, stated directly: the longest whole-character prefix within the budget.
    assert!(content.starts_with(&result.content));
    assert!(result.content.len() <= budget);
    assert_eq!(result.truncated, content.len() > budget);
    assert_eq!(result.truncated, result.content.len() < content.len());
    if let Some(next) = content[result.content.len()..].chars().next() {
        assert!(result.content.len() + next.len_utf8() > budget, "a character that fits was dropped");
    }

    // The estimate is of the bounded content (nagents: estimate_skill_tokens(bounded)), so it
    // never exceeds the limit.
    assert_eq!(result.estimated_tokens, estimate_skill_tokens(&result.content));
    assert!(result.estimated_tokens <= limit);
    assert_eq!(result.token_limit, token_limit);
    assert_eq!((&result.name, result.location.as_str()), (skill.name(), skill.location()));
});
