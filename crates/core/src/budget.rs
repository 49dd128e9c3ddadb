//! Deterministic token budgets for loaded skill content.

use serde::{Deserialize, Serialize};

use crate::skill::{Skill, SkillName};

pub const DEFAULT_SKILL_TOKEN_LIMIT: u32 = 10_000;
pub const MAX_SKILL_TOKEN_LIMIT: u32 = 100_000;

/// A load budget in estimated tokens: an integer in `1..=100_000`.
///
/// It deserializes from any number with that integral value, as JSON Schema's `integer` reads
/// JSON (`2.0` is the integer 2); fractions, booleans and strings are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "u32")]
pub struct TokenLimit(u32);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("skill_token_limit must be an integer between 1 and 100000")]
pub struct InvalidTokenLimit;

impl TokenLimit {
    pub const DEFAULT: TokenLimit = TokenLimit(DEFAULT_SKILL_TOKEN_LIMIT);

    pub fn new(limit: u64) -> Result<Self, InvalidTokenLimit> {
        match u32::try_from(limit) {
            Ok(limit) if (1..=MAX_SKILL_TOKEN_LIMIT).contains(&limit) => Ok(TokenLimit(limit)),
            _ => Err(InvalidTokenLimit),
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }

    fn byte_budget(self) -> usize {
        self.0 as usize * 4
    }
}

impl Default for TokenLimit {
    fn default() -> Self {
        TokenLimit::DEFAULT
    }
}

impl TryFrom<u64> for TokenLimit {
    type Error = InvalidTokenLimit;

    fn try_from(limit: u64) -> Result<Self, Self::Error> {
        TokenLimit::new(limit)
    }
}

impl<'de> Deserialize<'de> for TokenLimit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Limit;

        impl serde::de::Visitor<'_> for Limit {
            type Value = TokenLimit;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("an integer between 1 and 100000")
            }

            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<TokenLimit, E> {
                TokenLimit::new(value).map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(value), &self))
            }

            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<TokenLimit, E> {
                u64::try_from(value)
                    .ok()
                    .and_then(|value| TokenLimit::new(value).ok())
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Signed(value), &self))
            }

            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<TokenLimit, E> {
                let integral = value.fract() == 0.0 && (1.0..=f64::from(MAX_SKILL_TOKEN_LIMIT)).contains(&value);
                // Exact: an integral value within the range converts without rounding.
                integral
                    .then_some(TokenLimit(value as u32))
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Float(value), &self))
            }
        }

        deserializer.deserialize_any(Limit)
    }
}

impl From<TokenLimit> for u32 {
    fn from(limit: TokenLimit) -> Self {
        limit.0
    }
}

impl std::str::FromStr for TokenLimit {
    type Err = InvalidTokenLimit;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        text.parse::<u64>().map_err(|_| InvalidTokenLimit).and_then(TokenLimit::new)
    }
}

/// The result of a budgeted load, field for field nagents' `SkillLoadResult`. With the `openapi`
/// feature it is also its own OpenAPI schema (named `LoadResult`), so a service that answers it
/// documents exactly this shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(as = LoadResult, description = "nagents' `SkillLoadResult`.")
)]
pub struct SkillLoadResult {
    #[cfg_attr(feature = "openapi", schema(value_type = String, pattern = "^[A-Za-z0-9_-]{1,64}$"))]
    pub name: SkillName,
    pub location: String,
    /// The content cut to at most `4 * token_limit` UTF-8 bytes, never inside a character.
    pub content: String,
    pub truncated: bool,
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub estimated_tokens: u64,
    #[cfg_attr(feature = "openapi", schema(value_type = u32, minimum = 1, maximum = 100000))]
    pub token_limit: TokenLimit,
}

/// Estimates tokens as ceil(UTF-8 bytes / 4); this is no provider's tokenizer.
pub fn estimate_skill_tokens(content: &str) -> u64 {
    (content.len() as u64).div_ceil(4)
}

/// Bounds `content` to `4 * limit` UTF-8 bytes, dropping a character the cut would split.
pub fn budget_skill_content(skill: &Skill, content: &str, limit: TokenLimit) -> SkillLoadResult {
    let budget = limit.byte_budget();
    let truncated = content.len() > budget;
    let bounded = if truncated { &content[..content.floor_char_boundary(budget)] } else { content };
    SkillLoadResult {
        name: skill.name().clone(),
        location: skill.location().to_owned(),
        content: bounded.to_owned(),
        truncated,
        estimated_tokens: estimate_skill_tokens(bounded),
        token_limit: limit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bounded() {
        assert!(TokenLimit::new(0).is_err());
        assert!(TokenLimit::new(100_001).is_err());
        assert!(TokenLimit::new(u64::MAX).is_err());
        assert_eq!(TokenLimit::new(1).unwrap().get(), 1);
        assert_eq!("100000".parse::<TokenLimit>().unwrap().get(), 100_000);
    }

    #[test]
    fn limits_deserialize_from_integral_numbers_only() {
        let parse = |json: &str| serde_json::from_str::<TokenLimit>(json).map(TokenLimit::get).ok();
        assert_eq!(parse("2"), Some(2));
        assert_eq!(parse("2.0"), Some(2));
        assert_eq!(parse("1e5"), Some(100_000));
        assert_eq!(parse("100000.0"), Some(100_000));
        for refused in ["1.5", "0", "0.0", "-1", "-1.0", "100001", "100000.5", "1e300", "true", "\"2\"", "null", "[2]"]
        {
            assert_eq!(parse(refused), None, "{refused}");
        }
        let error = serde_json::from_str::<TokenLimit>("2.5").unwrap_err().to_string();
        assert!(error.contains("expected an integer between 1 and 100000"), "{error}");
    }

    #[test]
    fn cut_drops_a_split_character() {
        let skill = Skill::new("a", "d", "l").unwrap();
        let result = budget_skill_content(&skill, "abc😀", TokenLimit::new(1).unwrap());
        assert_eq!((result.content.as_str(), result.truncated, result.estimated_tokens), ("abc", true, 1));
        let result = budget_skill_content(&skill, "abcd", TokenLimit::new(1).unwrap());
        assert_eq!((result.content.as_str(), result.truncated), ("abcd", false));
        assert_eq!(estimate_skill_tokens("abcde"), 2);
    }

    proptest::proptest! {
        #[test]
        fn a_budget_is_the_longest_whole_character_prefix(content in "\\PC{0,64}", limit in 1u64..24) {
            let skill = Skill::new("a", "d", "l").unwrap();
            let result = budget_skill_content(&skill, &content, TokenLimit::new(limit).unwrap());
            let budget = limit as usize * 4;
            proptest::prop_assert!(content.starts_with(&result.content));
            proptest::prop_assert!(result.content.len() <= budget);
            proptest::prop_assert_eq!(result.truncated, content.len() > budget);
            // Nothing that would still fit was dropped: the next character would overflow.
            if result.truncated {
                let next = content[result.content.len()..].chars().next().unwrap();
                proptest::prop_assert!(result.content.len() + next.len_utf8() > budget);
            }
            proptest::prop_assert_eq!(result.estimated_tokens, (result.content.len() as u64).div_ceil(4));
        }
    }
}
