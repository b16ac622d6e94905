//! Swearing at one's luck is not swearing at someone: "Shit, I forgot my password again. How do
//! I reset it?" and "Anjir, laptopku mati pas presentasi…" open with profanity aimed at no one, and
//! a head on a sentence embedding reads the word, not where it points (issue "Read who says it":
//! 40% of such messages were flagged on unseen traffic). A validator with `exclamations: elided`
//! also reads a user's turn with its opening exclamation left out, and the lower score decides.
//!
//! What counts as an exclamation is narrow on purpose, since an insult addressed to the reader
//! can open the same way ("Idiot, why did you delete…"): the opening clauses, up to the first
//! comma, `!`, `.` or dash, made only of words on the exclamation list (and the particles
//! around them: "oh", "it", "lah"), followed by at least [`REST_WORDS`] words of the writer's own.
//! A name for a person ("idiot", "goblok", "bitch") is not on the list, nor is any pronoun, so
//! "Damn you, …" or "Anjing lu, …" is read whole; so is an exclamation with little else after it.

use serde::{Deserialize, Serialize};

/// How a validator's head reads a user's opening exclamation (`exclamations:` in its front
/// matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExclamationReading {
    /// The exclamation counts like any other words.
    #[default]
    Said,
    /// A user's turn is also read without its opening exclamation; the lower score decides.
    Elided,
}

/// Words that, alone or together, make an exclamation: swearing and its milder forms in English
/// and Indonesian (Jakarta slang), none of them a name for a person.
const EXCLAMATIONS: &[&str] = &[
    // English
    "shit",
    "damn",
    "dammit",
    "damnit",
    "goddamn",
    "goddammit",
    "crap",
    "fuck",
    "fck",
    "fuckin",
    "frick",
    "frickin",
    "hell",
    "heck",
    "bloody",
    "holy",
    "christ",
    "jesus",
    "geez",
    "jeez",
    "gosh",
    "omg",
    "wtf",
    "ffs",
    "bollocks",
    "bugger",
    "blimey",
    "crikey",
    "argh",
    "ugh",
    // Indonesian
    "anjir",
    "anjirr",
    "anjay",
    "anjrit",
    "anjim",
    "anjing",
    "njir",
    "njay",
    "wanjir",
    "buset",
    "busyet",
    "astaga",
    "astagfirullah",
    "astaghfirullah",
    "waduh",
    "aduh",
    "sialan",
    "sial",
    "kampret",
    "bangsat",
    "gila",
    "gokil",
    "cuk",
    "jancuk",
    "jancok",
    "taik",
    "tai",
    "mampus",
    "asem",
];

/// Words that ride along with an exclamation but make none on their own.
const PARTICLES: &[&str] = &[
    "oh", "ah", "aw", "man", "dude", "yeah", "wow", "whoa", "well", "it", "my", "god", "lord",
    "lah", "deh", "sih", "dah", "ya", "wah", "ih", "duh", "euy", "cuy", "coy", "bro", "gan",
    "banget", "bener",
];

/// The rest of the turn must be a message of its own: at least this many words.
pub(crate) const REST_WORDS: usize = 5;

/// Marks that end an opening clause.
const CLAUSE_ENDS: [char; 6] = [',', '!', '.', ';', '\u{2013}', '\u{2014}'];

/// `text` without its opening exclamation, where it opens with one and at least [`REST_WORDS`]
/// words follow; otherwise `None`, and the text is read whole.
pub(crate) fn without_exclamation(text: &str) -> Option<String> {
    let mut rest = text.trim_start();
    let mut elided = false;
    // Clauses one after another ("Ugh, damn it. My phone…"); the loop ends at the first that is
    // not all exclamation.
    while let Some(end) = rest.find(CLAUSE_ENDS) {
        let clause = &rest[..end];
        let words: Vec<String> = clause
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let all_exclamation = !words.is_empty()
            && words.len() <= 4
            && words
                .iter()
                .all(|w| EXCLAMATIONS.contains(&w.as_str()) || PARTICLES.contains(&w.as_str()));
        if !all_exclamation {
            break;
        }
        // A clause of particles alone ("Oh, ") is passed over but leaves out nothing by itself:
        // an exclamation must follow it.
        elided |= words.iter().any(|w| EXCLAMATIONS.contains(&w.as_str()));
        rest =
            rest[end..].trim_start_matches(|c: char| CLAUSE_ENDS.contains(&c) || c.is_whitespace());
    }
    let words = rest
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().any(char::is_alphabetic))
        .count();
    (elided && words >= REST_WORDS).then(|| rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_opening_exclamation_is_left_out_when_a_message_of_its_own_follows() {
        assert_eq!(
            without_exclamation("Shit, I forgot my password again. How do I reset it?").as_deref(),
            Some("I forgot my password again. How do I reset it?")
        );
        assert_eq!(
            without_exclamation("Ugh, damn it. My phone fell in the sink, what now?").as_deref(),
            Some("My phone fell in the sink, what now?")
        );
        assert_eq!(
            without_exclamation("Waduh anjir, nasinya gosong semua. Ada caranya?").as_deref(),
            Some("nasinya gosong semua. Ada caranya?")
        );
        assert_eq!(
            without_exclamation("Oh, holy crap! The train left early, is there another?")
                .as_deref(),
            Some("The train left early, is there another?")
        );
    }

    #[test]
    fn an_insult_a_pronoun_or_a_short_rest_keeps_the_text_whole() {
        for text in [
            // A name for the reader is no exclamation.
            "Idiot, why did you delete the whole folder without asking me?",
            "Goblok, kenapa file presentasiku kamu hapus tanpa bilang?",
            // Aimed at someone.
            "Damn you, you lying little rat, give my money back now.",
            "Anjing lu, balikin duit gue sekarang atau gue datengin rumah lu.",
            // Too little after it to be a message of its own.
            "Shit, you are useless.",
            // No exclamation at all, or one not at the opening.
            "Oh, could you check my order status please?",
            "I forgot my password again, shit. How do I reset it?",
            "",
        ] {
            assert_eq!(without_exclamation(text), None, "{text:?}");
        }
    }
}
