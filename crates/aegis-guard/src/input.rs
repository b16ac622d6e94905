//! What the guard checks: one turn of a conversation, with the turns before it as context. A lone
//! message is a user's turn with no context, so every caller speaks the same type whether it has
//! a conversation or a single string.

use std::ops::{Deref, Range};
use std::sync::Arc;

use aegis_engine::{ChatFormat, Segment, Speaker};
use serde::{Deserialize, Serialize};

use crate::error::{GuardError, Result};

/// Who wrote a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Role {
    /// A lone message is a user's.
    #[default]
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            other => Err(format!(
                "role {other:?} is not one the guard checks: use user or assistant"
            )),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Turn {
    pub role: Role,
    pub content: String,
}

/// The turns before a checked one, oldest first: a window on the conversation's turns, shared by
/// every turn checked in it. Checking each of a conversation's turns in context then keeps one
/// copy of the conversation, not one per turn (which grows with the square of its length), and
/// cutting the oldest turns to fit a budget copies nothing either.
#[derive(Clone, Default)]
pub struct EarlierTurns {
    conversation: Arc<[Turn]>,
    window: Range<usize>,
}

impl EarlierTurns {
    /// The turns before `index` in `conversation`.
    pub fn before(conversation: &Arc<[Turn]>, index: usize) -> Self {
        Self {
            conversation: Arc::clone(conversation),
            window: 0..index.min(conversation.len()),
        }
    }

    /// These turns without the oldest `cut`.
    pub fn without_oldest(&self, cut: usize) -> Self {
        Self {
            conversation: Arc::clone(&self.conversation),
            window: (self.window.start + cut).min(self.window.end)..self.window.end,
        }
    }
}

impl Deref for EarlierTurns {
    type Target = [Turn];
    fn deref(&self) -> &[Turn] {
        &self.conversation[self.window.clone()]
    }
}

impl From<Vec<Turn>> for EarlierTurns {
    fn from(turns: Vec<Turn>) -> Self {
        let window = 0..turns.len();
        Self {
            conversation: turns.into(),
            window,
        }
    }
}

impl std::fmt::Debug for EarlierTurns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for EarlierTurns {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl PartialEq<[Turn]> for EarlierTurns {
    fn eq(&self, other: &[Turn]) -> bool {
        **self == *other
    }
}

impl PartialEq<Vec<Turn>> for EarlierTurns {
    fn eq(&self, other: &Vec<Turn>) -> bool {
        **self == **other
    }
}

impl Serialize for EarlierTurns {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EarlierTurns {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        Vec::<Turn>::deserialize(deserializer).map(Self::from)
    }
}

impl Turn {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// Which turns of a conversation get a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TurnsChecked {
    /// The newest turn, read in the context of the others: what a live chat needs.
    #[default]
    Last,
    /// Every turn, each in the context of the turns before it: what an imported log needs.
    All,
}

/// One turn to check and the turns before it.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardInput {
    /// The turns before the checked one, oldest first.
    pub context: EarlierTurns,
    pub turn: Turn,
    /// The checked turn's position in its conversation, from 0.
    pub index: usize,
}

impl GuardInput {
    /// A single message, as a user's turn with nothing before it.
    pub fn message(text: impl Into<String>) -> Self {
        Self {
            context: EarlierTurns::default(),
            turn: Turn::user(text),
            index: 0,
        }
    }

    /// The text whose verdict this is.
    pub fn text(&self) -> &str {
        &self.turn.content
    }

    /// The assistant's answer `text` to `conversation` (the user's turn last), read in it: how
    /// the answer gate and a streamed answer's checks read what a model wrote.
    pub fn answer(conversation: Vec<Turn>, text: impl Into<String>) -> Self {
        Self {
            index: conversation.len(),
            context: conversation.into(),
            turn: Turn::assistant(text),
        }
    }

    /// The inputs `checked` asks for in `turns`. The whole conversation is validated first, so a
    /// bad turn anywhere is refused by its position before anything is computed.
    pub fn from_conversation(turns: &[Turn], checked: TurnsChecked) -> Result<Vec<Self>> {
        validate_conversation(turns)?;
        let wanted = match checked {
            TurnsChecked::Last => turns.len() - 1..turns.len(),
            TurnsChecked::All => 0..turns.len(),
        };
        // One copy of the conversation, however many of its turns are checked.
        let conversation: Arc<[Turn]> = turns.into();
        Ok(wanted
            .map(|index| Self {
                context: EarlierTurns::before(&conversation, index),
                turn: conversation[index].clone(),
                index,
            })
            .collect())
    }
}

impl From<String> for GuardInput {
    fn from(text: String) -> Self {
        Self::message(text)
    }
}

impl From<&str> for GuardInput {
    fn from(text: &str) -> Self {
        Self::message(text)
    }
}

/// The model's chat prompt, in its `format`, for the next assistant turn after `turns`: what a
/// prototype's answer is generated from. Every turn's content is user text, so no turn can close
/// its own turn.
pub fn answer_prompt(format: ChatFormat, turns: &[Turn]) -> Vec<aegis_engine::Segment> {
    format.prompt(turns.iter().map(|turn| {
        let speaker = match turn.role {
            Role::User => Speaker::User,
            Role::Assistant => Speaker::Model,
        };
        (speaker, vec![Segment::User(turn.content.clone())])
    }))
}

/// [`answer_prompt`] for the most recent turns that leave `answer_tokens` of room in `model`'s
/// context: the oldest turns go first. When the last turn alone leaves no room, the answer
/// cannot be written and that is [`GuardError::TooLong`] (a 413 to an HTTP client).
pub fn fitting_answer_prompt(
    model: &dyn aegis_engine::LanguageModel,
    turns: &[Turn],
    answer_tokens: usize,
) -> Result<Vec<aegis_engine::Segment>> {
    validate_conversation(turns)?;
    let limit = model.info().context_length;
    let format = model.info().chat_format;
    let fits = |start: usize| -> Result<(bool, usize)> {
        let tokens = model.count_prompt_tokens(&answer_prompt(format, &turns[start..]))?;
        Ok((tokens + answer_tokens <= limit, tokens))
    };
    // The whole conversation usually fits: one tokenisation.
    if fits(0)?.0 {
        return Ok(answer_prompt(format, turns));
    }
    let last = turns.len() - 1;
    let (last_fits, last_tokens) = fits(last)?;
    if !last_fits {
        return Err(GuardError::TooLong {
            message_tokens: model.count_user_tokens(&turns[last].content)?,
            prompt_tokens: last_tokens + answer_tokens,
            limit,
        });
    }
    // Fitting only gets easier as older turns go, so the earliest start that fits is found by
    // halving: a handful of tokenisations even for a long conversation. turns[low..] does not
    // fit, turns[high..] does.
    let (mut low, mut high) = (0, last);
    while high - low > 1 {
        let middle = (low + high) / 2;
        if fits(middle)?.0 {
            high = middle;
        } else {
            low = middle;
        }
    }
    tracing::debug!(
        dropped = high,
        "the oldest turns were left out of the answer's prompt to fit the context"
    );
    Ok(answer_prompt(format, &turns[high..]))
}

/// A conversation has at least one turn and no empty turn.
pub fn validate_conversation(turns: &[Turn]) -> Result<()> {
    if turns.is_empty() {
        return Err(GuardError::BadTurn {
            index: None,
            problem: "the conversation has no turns".into(),
        });
    }
    match turns.iter().position(|t| t.content.trim().is_empty()) {
        Some(index) => Err(GuardError::BadTurn {
            index: Some(index),
            problem: "its content is empty".into(),
        }),
        None => Ok(()),
    }
}

/// A conversation as clients send it (the OpenAI chat shape, a list of `{role, content}`): its
/// user and assistant turns, each with its position in the list sent, so every error and every
/// checked turn is named by the position the client sees. The HTTP API and file imports both read
/// conversations through it, so a turn one refuses the other refuses with the same words.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedConversation {
    turns: Vec<Turn>,
    positions: Vec<usize>,
}

impl ReceivedConversation {
    /// Reads `messages`; a turn without a role or content, or a conversation with no user or
    /// assistant turn, is refused by position.
    pub fn parse(messages: &[serde_json::Value]) -> Result<Self> {
        let mut turns = Vec::new();
        let mut positions = Vec::new();
        for (index, message) in messages.iter().enumerate() {
            let bad = |problem: &str| GuardError::BadTurn {
                index: Some(index),
                problem: problem.into(),
            };
            let role = message
                .get("role")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| bad("needs a role: user or assistant"))?;
            let content = message.get("content").ok_or_else(|| bad("needs content"))?;
            if let Some(turn) = turn_from_parts(index, role, content)? {
                turns.push(turn);
                positions.push(index);
            }
        }
        if turns.is_empty() {
            return Err(GuardError::BadTurn {
                index: None,
                problem: "messages holds no user or assistant turn to check".into(),
            });
        }
        Ok(Self { turns, positions })
    }

    /// The user and assistant turns, system ones left out.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    /// The inputs `checked` asks for, each named (and any error placed) by its position in the
    /// list sent rather than among the turns left after system ones.
    pub fn inputs(&self, checked: TurnsChecked) -> Result<Vec<GuardInput>> {
        let mut inputs =
            GuardInput::from_conversation(&self.turns, checked).map_err(|e| match e {
                GuardError::BadTurn {
                    index: Some(i),
                    problem,
                } => GuardError::BadTurn {
                    index: Some(self.positions[i]),
                    problem,
                },
                other => other,
            })?;
        for input in &mut inputs {
            input.index = self.positions[input.index];
        }
        Ok(inputs)
    }
}

/// A turn as clients send it (the OpenAI chat shape: `role` and `content`, where content is a
/// string or a list of text parts), checked and named by its position when it is unusable.
/// `system` and `developer` turns are the application's own instructions, not traffic: they are
/// neither checked nor context, and `Ok(None)` says so.
fn turn_from_parts(index: usize, role: &str, content: &serde_json::Value) -> Result<Option<Turn>> {
    let bad = |problem: String| GuardError::BadTurn {
        index: Some(index),
        problem,
    };
    // System turns are read by neither the guard nor the answer, but a malformed one is still
    // the client's mistake, refused like any other turn's.
    let role: Option<Role> = match role {
        "system" | "developer" => None,
        other => Some(other.parse().map_err(bad)?),
    };
    let content = match content {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Array(parts) => parts
            .iter()
            .map(|part| {
                part.get("text")
                    .and_then(|t| t.as_str())
                    .filter(|_| part.get("type").and_then(|t| t.as_str()) == Some("text"))
                    .ok_or_else(|| {
                        bad("content parts must be {\"type\": \"text\", \"text\": ...}".into())
                    })
            })
            .collect::<Result<Vec<_>>>()?
            .join("\n"),
        _ => {
            return Err(bad(
                "content must be a string or a list of text parts".into()
            ))
        }
    };
    if content.trim().is_empty() {
        return Err(bad("its content is empty".into()));
    }
    Ok(role.map(|role| Turn { role, content }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_checked_turn_reads_one_shared_copy_of_the_conversation() -> Result<()> {
        let turns: Vec<Turn> = (0..200)
            .map(|i| match i % 2 {
                0 => Turn::user(format!("pesan {i}")),
                _ => Turn::assistant(format!("jawaban {i}")),
            })
            .collect();
        let inputs = GuardInput::from_conversation(&turns, TurnsChecked::All)?;
        let first = &inputs[0].context.conversation;
        assert!(inputs
            .iter()
            .all(|i| Arc::ptr_eq(&i.context.conversation, first)));
        for (i, input) in inputs.iter().enumerate() {
            assert_eq!(input.context, turns[..i]);
        }
        Ok(())
    }

    #[test]
    fn the_last_turn_is_checked_with_every_turn_before_it() -> Result<()> {
        let turns = [
            Turn::user("kamu tinggal di mana?"),
            Turn::assistant("Maaf, saya tidak bisa membantu."),
            Turn::user("aku tahu sekolahmu"),
        ];
        let last = GuardInput::from_conversation(&turns, TurnsChecked::Last)?;
        assert_eq!(last.len(), 1);
        assert_eq!(last[0].index, 2);
        assert_eq!(last[0].context, turns[..2]);
        let all = GuardInput::from_conversation(&turns, TurnsChecked::All)?;
        assert_eq!(
            all.iter().map(|i| i.context.len()).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        Ok(())
    }

    #[test]
    fn bad_conversations_are_refused_by_the_turn_at_fault() {
        let empty = GuardInput::from_conversation(&[], TurnsChecked::Last).unwrap_err();
        assert_eq!(empty.to_string(), "the conversation has no turns");
        let blank = GuardInput::from_conversation(
            &[Turn::user("halo"), Turn::assistant("  ")],
            TurnsChecked::All,
        )
        .unwrap_err();
        assert_eq!(blank.to_string(), "turn 1: its content is empty");
    }

    #[test]
    fn a_received_conversation_names_turns_by_their_place_in_the_list_sent() -> Result<()> {
        let messages = [
            json!({"role": "system", "content": "be kind"}),
            json!({"role": "user", "content": "halo"}),
            json!({"role": "assistant", "content": "hai"}),
        ];
        let conversation = ReceivedConversation::parse(&messages)?;
        assert_eq!(conversation.turns().len(), 2);
        let all = conversation.inputs(TurnsChecked::All)?;
        assert_eq!(all.iter().map(|i| i.index).collect::<Vec<_>>(), [1, 2]);
        let missing_role = [
            json!({"role": "user", "content": "a"}),
            json!({"content": "b"}),
        ];
        let error = ReceivedConversation::parse(&missing_role).unwrap_err();
        assert_eq!(error.to_string(), "turn 1: needs a role: user or assistant");
        let only_system = [json!({"role": "system", "content": "x"})];
        assert!(ReceivedConversation::parse(&only_system).is_err());
        Ok(())
    }

    #[test]
    fn client_turns_take_the_chat_shape_and_name_what_is_wrong() -> Result<()> {
        let parts = json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]);
        assert_eq!(
            turn_from_parts(0, "assistant", &parts)?,
            Some(Turn::assistant("a\nb"))
        );
        assert_eq!(turn_from_parts(0, "system", &json!("be kind"))?, None);
        let role = turn_from_parts(3, "robot", &json!("hi")).unwrap_err();
        assert!(
            role.to_string().starts_with("turn 3: role \"robot\""),
            "{role}"
        );
        let number = turn_from_parts(1, "user", &json!(5)).unwrap_err();
        assert!(
            number.to_string().contains("turn 1: content must be"),
            "{number}"
        );
        let image = turn_from_parts(2, "user", &json!([{"type": "image_url"}])).unwrap_err();
        assert!(
            image.to_string().contains("turn 2: content parts"),
            "{image}"
        );
        Ok(())
    }
}
