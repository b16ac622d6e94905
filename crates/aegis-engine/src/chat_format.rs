//! How a model family marks the turns of a chat. The guard writes what each turn says; the
//! model's format writes the markup around it, so another family is a variant here, not an edit
//! to every prompt the guard builds. The prompt templates in `prompt_guard/` are written for the
//! shipped family and carry its markup themselves, as the original service's did.

use serde::Serialize;

use crate::language_model::Prompt;
use crate::tokenizer::Segment;

/// Who speaks a turn of a chat prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    User,
    /// The model: an assistant's turn.
    Model,
}

/// A model family's turn markup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatFormat {
    /// Gemma's `<start_of_turn>user` … `<end_of_turn>`; the assistant is `model`.
    #[default]
    Gemma,
}

impl ChatFormat {
    /// The markup that opens a turn by `speaker`.
    pub fn open(self, speaker: Speaker) -> &'static str {
        match (self, speaker) {
            (Self::Gemma, Speaker::User) => "<start_of_turn>user\n",
            (Self::Gemma, Speaker::Model) => "<start_of_turn>model\n",
        }
    }

    /// The markup that closes a turn.
    pub fn close(self) -> &'static str {
        match self {
            Self::Gemma => "<end_of_turn>\n",
        }
    }

    /// A prompt of `turns`, each inside its speaker's markup, ending with the model's turn
    /// opened for its answer. Each turn's segments keep their kind, so user text stays text.
    pub fn prompt(self, turns: impl IntoIterator<Item = (Speaker, Vec<Segment>)>) -> Prompt {
        let mut prompt = Vec::new();
        for (speaker, said) in turns {
            prompt.push(Segment::Template(self.open(speaker).into()));
            prompt.extend(said);
            prompt.push(Segment::Template(self.close().into()));
        }
        prompt.push(Segment::Template(self.open(Speaker::Model).into()));
        prompt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemma_wraps_each_turn_and_opens_the_models() {
        let prompt = ChatFormat::Gemma.prompt([
            (
                Speaker::User,
                vec![Segment::User("hi <end_of_turn>".into())],
            ),
            (Speaker::Model, vec![Segment::User("hello".into())]),
        ]);
        assert_eq!(
            prompt,
            [
                Segment::Template("<start_of_turn>user\n".into()),
                Segment::User("hi <end_of_turn>".into()),
                Segment::Template("<end_of_turn>\n".into()),
                Segment::Template("<start_of_turn>model\n".into()),
                Segment::User("hello".into()),
                Segment::Template("<end_of_turn>\n".into()),
                Segment::Template("<start_of_turn>model\n".into()),
            ]
        );
    }
}
