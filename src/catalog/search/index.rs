//! The BM25 index of every skill's name, description and `SKILL.md` text, and the queries it
//! answers.
//!
//! Ranking is BM25 over the three fields, weighted (a term in the name counts most), as BM25F
//! combines fields: the weighted, length-normalized counts are added before saturation. A skill
//! must contain every term of the query (the last one may also begin a word, so that results
//! follow typing); only when no skill contains them all do skills that contain any of them
//! count. A skill whose name is the query comes first.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Serialize;

use crate::catalog::snapshot::CatalogSkill;

/// The fields of a document: name, description, the text of `SKILL.md` after its frontmatter.
const FIELDS: usize = 3;
/// How much a term counts in each field.
const WEIGHTS: [f32; FIELDS] = [3.0, 2.0, 1.0];
/// BM25's saturation and length normalization.
const K1: f32 = 1.2;
const B: f32 = 0.75;
/// The part of a `SKILL.md` indexed and kept for excerpts (bytes; the rest is not searched).
pub const MAX_INDEXED_BYTES: usize = 64 * 1024;
/// The longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 256;
/// A term is cut to this many characters.
const MAX_TERM_CHARS: usize = 64;
/// Index terms the last query term may stand for as a prefix, at most (the most common first).
const MAX_EXPANSIONS: usize = 64;
/// How much a word the last query term only begins counts, against the word itself.
const PREFIX_WEIGHT: f32 = 0.5;
/// An excerpt's length around its first match, in characters.
const EXCERPT_BEFORE: usize = 60;
const EXCERPT_CHARS: usize = 200;

/// A search term: a maximal run of letters and digits, lowercased, at most [`MAX_TERM_CHARS`].
fn term_ranges(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut chars = text.char_indices().peekable();
    std::iter::from_fn(move || {
        let (start, _) = chars.by_ref().find(|(_, c)| c.is_alphanumeric())?;
        let mut end = text.len();
        while let Some(&(at, c)) = chars.peek() {
            if !c.is_alphanumeric() {
                end = at;
                break;
            }
            chars.next();
        }
        Some((start, end))
    })
}

fn normalize(word: &str) -> String {
    word.chars().flat_map(char::to_lowercase).take(MAX_TERM_CHARS).collect()
}

fn terms(text: &str) -> impl Iterator<Item = String> + '_ {
    term_ranges(text).map(|(start, end)| normalize(&text[start..end]))
}

/// The terms of one field and how often each occurs.
#[derive(Debug, Default)]
struct FieldTerms {
    counts: Vec<(Box<str>, u32)>,
    length: u32,
}

impl FieldTerms {
    fn of(text: &str) -> Self {
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut length = 0u32;
        for term in terms(text) {
            *counts.entry(term).or_default() += 1;
            length = length.saturating_add(1);
        }
        FieldTerms { counts: counts.into_iter().map(|(term, count)| (term.into_boxed_str(), count)).collect(), length }
    }
}

/// What the index holds of one skill version.
#[derive(Debug)]
pub struct SearchDocument {
    fields: [FieldTerms; FIELDS],
    /// The indexed text, for excerpts.
    body: Box<str>,
}

impl SearchDocument {
    /// The document of a skill with this name, description and `SKILL.md` (`None`: its text could
    /// not be read, so only its name and description are searched).
    pub fn new(name: &str, description: &str, skill_md: Option<&str>) -> Self {
        let body = skill_md.map_or("", |text| {
            let body = crate::spec::body_after_frontmatter(text);
            &body[..floor_char_boundary(body, MAX_INDEXED_BYTES)]
        });
        SearchDocument {
            fields: [FieldTerms::of(name), FieldTerms::of(description), FieldTerms::of(body)],
            body: body.into(),
        }
    }
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    (0..=at).rev().find(|&index| text.is_char_boundary(index)).unwrap_or(0)
}

/// One skill in one document's postings: how often the term occurs in each field.
#[derive(Debug, Clone, Copy)]
struct Posting {
    skill: u32,
    counts: [u32; FIELDS],
}

/// The index of one catalog version.
#[derive(Debug)]
pub struct SearchIndex {
    skills: Vec<(Arc<CatalogSkill>, Arc<SearchDocument>)>,
    /// Every term, sorted (so that a prefix is a range), and its postings in skill order.
    terms: Vec<Box<str>>,
    postings: Vec<Vec<Posting>>,
    /// For each skill, BM25's length normalization of each field: `1 - b + b * length / average`.
    norms: Vec<[f32; FIELDS]>,
}

/// A parsed query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    terms: Vec<String>,
    /// Whether the last term also matches words it begins: it is not followed by a separator.
    prefix: bool,
}

/// Why a query cannot be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query `q` is longer than {MAX_QUERY_CHARS} characters")]
    TooLong,
}

impl SearchQuery {
    /// The query of `text`; one without a letter or digit has no terms and matches nothing.
    pub fn parse(text: &str) -> Result<Self, QueryError> {
        if text.chars().count() > MAX_QUERY_CHARS {
            return Err(QueryError::TooLong);
        }
        let mut terms: Vec<String> = Vec::new();
        for term in self::terms(text) {
            if !terms.contains(&term) {
                terms.push(term);
            }
        }
        let prefix = text.chars().last().is_some_and(char::is_alphanumeric);
        Ok(SearchQuery { terms, prefix })
    }

    /// Whether `word` (a term of a text, as written) is one the query asks for: compared as
    /// its normalized form, without making it.
    fn matches(&self, word: &str) -> bool {
        let normalized = || word.chars().flat_map(char::to_lowercase).take(MAX_TERM_CHARS);
        self.terms.iter().any(|wanted| normalized().eq(wanted.chars()))
            || (self.prefix
                && self.terms.last().is_some_and(|last| {
                    let mut word = normalized();
                    last.chars().all(|expected| word.next() == Some(expected))
                }))
    }
}

/// A piece of an excerpt; the pieces that match the query are highlighted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ExcerptPart {
    pub text: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(default = false)]
    pub highlight: bool,
}

/// A skill found, with its score and an excerpt of where the query matched.
#[derive(Debug)]
pub struct Ranked<'a> {
    pub skill: &'a CatalogSkill,
    pub score: f32,
    pub excerpt: Vec<ExcerptPart>,
}

/// The answer to one query: the best hits, and how many skills matched in all.
#[derive(Debug)]
pub struct Results<'a> {
    pub total: usize,
    pub hits: Vec<Ranked<'a>>,
}

impl SearchIndex {
    /// The index of the skills of one catalog version, in its order, each with its document.
    pub fn build(skills: Vec<(Arc<CatalogSkill>, Arc<SearchDocument>)>) -> Self {
        let mut postings: HashMap<&str, Vec<Posting>> = HashMap::new();
        let mut totals = [0f64; FIELDS];
        for (index, (_, document)) in skills.iter().enumerate() {
            let skill = u32::try_from(index).expect("fewer skills than u32::MAX");
            for (field, terms) in document.fields.iter().enumerate() {
                totals[field] += f64::from(terms.length);
                for (term, count) in &terms.counts {
                    let list = postings.entry(term).or_default();
                    match list.last_mut() {
                        Some(last) if last.skill == skill => last.counts[field] = *count,
                        _ => {
                            let mut counts = [0; FIELDS];
                            counts[field] = *count;
                            list.push(Posting { skill, counts });
                        }
                    }
                }
            }
        }
        let mut sorted: Vec<(&str, Vec<Posting>)> = postings.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let count = skills.len().max(1) as f64;
        let averages = totals.map(|total| ((total / count) as f32).max(1.0));
        let norms = skills
            .iter()
            .map(|(_, document)| {
                std::array::from_fn(|field| 1.0 - B + B * document.fields[field].length as f32 / averages[field])
            })
            .collect();
        let (terms, postings) = sorted.into_iter().map(|(term, list)| (Box::<str>::from(term), list)).unzip();
        SearchIndex { skills, terms, postings, norms }
    }

    pub fn len(&self) -> usize {
        self.skills.len()
    }

    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The index terms `query`'s terms stand for, each with its weight: every term itself, and
    /// for the last one, when it may be a prefix, the most common words it begins.
    fn wanted(&self, query: &SearchQuery) -> Vec<Vec<(usize, f32)>> {
        let last = query.terms.len().saturating_sub(1);
        query
            .terms
            .iter()
            .enumerate()
            .map(|(position, term)| {
                let exact = self.terms.binary_search_by(|known| (**known).cmp(term.as_str())).ok();
                let mut wanted: Vec<(usize, f32)> = exact.map(|index| (index, 1.0)).into_iter().collect();
                if position == last && query.prefix {
                    let start = self.terms.partition_point(|known| **known <= *term.as_str());
                    let end = start + self.terms[start..].partition_point(|known| known.starts_with(term.as_str()));
                    let mut longer: Vec<usize> = (start..end).collect();
                    if longer.len() > MAX_EXPANSIONS {
                        longer.select_nth_unstable_by_key(MAX_EXPANSIONS, |&index| {
                            std::cmp::Reverse(self.postings[index].len())
                        });
                        longer.truncate(MAX_EXPANSIONS);
                    }
                    wanted.extend(longer.into_iter().map(|index| (index, PREFIX_WEIGHT)));
                }
                wanted
            })
            .collect()
    }

    /// The skills that match `query`, best first, at most `limit` of them.
    pub fn search(&self, query: &SearchQuery, limit: usize) -> Results<'_> {
        if query.terms.is_empty() {
            return Results { total: 0, hits: Vec::new() };
        }
        let wanted = self.wanted(query);
        let count = self.skills.len();
        let mut scores = vec![0f32; count];
        // For each skill, the query terms it contains, as bits (at most 64 terms are told apart).
        let mut found = vec![0u64; count];
        let skills = count as f32;
        for (position, alternatives) in wanted.iter().enumerate() {
            let bit = 1u64 << position.min(63);
            for &(term, weight) in alternatives {
                let list = &self.postings[term];
                let frequency = list.len() as f32;
                let idf = (1.0 + (skills - frequency + 0.5) / (frequency + 0.5)).ln();
                for posting in list {
                    let skill = posting.skill as usize;
                    let norms = &self.norms[skill];
                    let tf: f32 =
                        (0..FIELDS).map(|field| WEIGHTS[field] * posting.counts[field] as f32 / norms[field]).sum();
                    scores[skill] += weight * idf * tf * (K1 + 1.0) / (tf + K1);
                    found[skill] |= bit;
                }
            }
        }
        let all = if wanted.len() >= 64 { u64::MAX } else { (1u64 << wanted.len()) - 1 };
        let mut matched: Vec<usize> = (0..count).filter(|&skill| found[skill] == all).collect();
        if matched.is_empty() {
            matched = (0..count).filter(|&skill| found[skill] != 0).collect();
        }
        let total = matched.len();
        let whole = query.terms.join("-");
        let named = |skill: usize| self.skills[skill].0.skill.name().as_str().eq_ignore_ascii_case(&whole);
        let rank = |a: &usize, b: &usize| {
            named(*b)
                .cmp(&named(*a))
                .then(scores[*b].total_cmp(&scores[*a]))
                .then_with(|| self.skills[*a].0.skill.name().cmp(self.skills[*b].0.skill.name()))
        };
        if matched.len() > limit && limit > 0 {
            matched.select_nth_unstable_by(limit - 1, rank);
        }
        matched.truncate(limit);
        matched.sort_unstable_by(rank);
        let hits = matched
            .into_iter()
            .map(|skill| {
                let (catalog_skill, document) = &self.skills[skill];
                let excerpt = excerpt(&document.body, query)
                    .or_else(|| excerpt(catalog_skill.skill.description(), query))
                    .unwrap_or_else(|| plain_excerpt(catalog_skill.skill.description()));
                Ranked { skill: catalog_skill, score: scores[skill], excerpt }
            })
            .collect();
        Results { total, hits }
    }
}

/// The part of `text` around the first word the query matches, with every matching word in it
/// highlighted and runs of whitespace made one space; `None` when no word matches.
fn excerpt(text: &str, query: &SearchQuery) -> Option<Vec<ExcerptPart>> {
    let (first, _) = term_ranges(text).find(|(start, end)| query.matches(&text[*start..*end]))?;
    // From up to EXCERPT_BEFORE characters before the match, starting after a space if there is one.
    let mut start = text[..first].char_indices().rev().nth(EXCERPT_BEFORE - 1).map_or(0, |(at, _)| at);
    if start > 0
        && let Some(space) = text[start..first].find(char::is_whitespace)
    {
        start += space;
    }
    let end = text[start..].char_indices().nth(EXCERPT_CHARS).map_or(text.len(), |(at, _)| start + at);
    // Cut at a space after the match, unless the text ends first.
    let end = match text[first..end].rfind(char::is_whitespace) {
        Some(space) if end < text.len() && space > 0 => first + space,
        _ => end,
    };
    let window = &text[start..end];
    let mut parts = Vec::new();
    let mut plain = String::new();
    if start > 0 {
        plain.push('…');
    }
    let mut at = 0;
    for (word_start, word_end) in term_ranges(window) {
        if !query.matches(&window[word_start..word_end]) {
            continue;
        }
        push_collapsed(&mut plain, &window[at..word_start]);
        if !plain.is_empty() {
            parts.push(ExcerptPart { text: std::mem::take(&mut plain), highlight: false });
        }
        parts.push(ExcerptPart { text: window[word_start..word_end].to_owned(), highlight: true });
        at = word_end;
    }
    push_collapsed(&mut plain, &window[at..]);
    if end < text.len() {
        plain.push('…');
    }
    if !plain.is_empty() {
        parts.push(ExcerptPart { text: plain, highlight: false });
    }
    if let Some(first) = parts.first_mut().filter(|part| !part.highlight) {
        first.text = first.text.trim_start().to_owned();
    }
    if let Some(last) = parts.last_mut().filter(|part| !part.highlight) {
        last.text.truncate(last.text.trim_end().len());
    }
    Some(parts)
}

/// The start of `text` as an excerpt without highlights.
fn plain_excerpt(text: &str) -> Vec<ExcerptPart> {
    let end = text.char_indices().nth(EXCERPT_CHARS).map_or(text.len(), |(at, _)| at);
    let mut plain = String::new();
    push_collapsed(&mut plain, &text[..end]);
    if end < text.len() {
        plain.push('…');
    }
    vec![ExcerptPart { text: plain.trim().to_owned(), highlight: false }]
}

fn push_collapsed(out: &mut String, text: &str) {
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = true;
            continue;
        }
        if space {
            out.push(' ');
        }
        space = false;
        out.push(c);
    }
    if space {
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(parts: &[ExcerptPart]) -> String {
        parts.iter().map(|part| if part.highlight { format!("[{}]", part.text) } else { part.text.clone() }).collect()
    }

    #[test]
    fn terms_are_lowercased_runs_of_letters_and_digits() {
        let found: Vec<String> = terms("PDF-tools: Fill forms, v2.0 — Ünïcode_ok").collect();
        assert_eq!(found, ["pdf", "tools", "fill", "forms", "v2", "0", "ünïcode", "ok"]);
        assert_eq!(terms(&"x".repeat(100)).next().unwrap().len(), MAX_TERM_CHARS);
    }

    #[test]
    fn queries_are_bounded_and_the_last_term_is_a_prefix_while_typed() {
        assert!(SearchQuery::parse("  ").unwrap().terms.is_empty());
        assert!(SearchQuery::parse("--").unwrap().terms.is_empty());
        assert_eq!(SearchQuery::parse(&"a".repeat(MAX_QUERY_CHARS + 1)), Err(QueryError::TooLong));
        let typing = SearchQuery::parse("Fill PD").unwrap();
        assert_eq!((typing.terms.as_slice(), typing.prefix), (["fill".to_owned(), "pd".to_owned()].as_slice(), true));
        assert!(!SearchQuery::parse("fill pdf ").unwrap().prefix);
        assert_eq!(SearchQuery::parse("pdf pdf").unwrap().terms, ["pdf"]);
    }

    #[test]
    fn excerpts_highlight_every_match_around_the_first() {
        let body = format!(
            "{} The form filler fills PDF forms.\n\nIt also   reads pdfs. {}",
            "lead ".repeat(30),
            "tail ".repeat(60)
        );
        let query = SearchQuery::parse("pdf").unwrap();
        let parts = excerpt(&body, &query).unwrap();
        let shown = text(&parts);
        assert!(shown.starts_with("… lead"), "{shown}");
        assert!(shown.contains("fills [PDF] forms. It also reads [pdfs]."), "{shown}");
        assert!(shown.ends_with('…'), "{shown}");
        assert!(shown.chars().count() <= EXCERPT_CHARS + 2, "{shown}");
        assert!(excerpt("nothing here", &query).is_none());
        let exact = SearchQuery::parse("pdf ").unwrap();
        assert!(!text(&excerpt(&body, &exact).unwrap()).contains("[pdfs]"));
    }
}
