//! What a head knows of the encoder it was trained on, beyond a hash of its weights: the
//! embeddings of a few fixed probe texts. A console that reads embeddings from a server has no
//! weights to hash; it embeds the probes there and compares. A truncated (Matryoshka) dimension,
//! a GGUF without the dense projections, a server that drops the attention mask past a few
//! hundred tokens, or one that does not normalise each shows up as a probe that no longer
//! matches, at connect, instead of as quietly worse verdicts.

use serde::{Deserialize, Serialize};

/// Below this cosine between a probe's recorded and served embedding the encoders differ. Two
/// builds of the same weights (bf16 and f32 kernels, llama.cpp and candle) agree past 0.9995 on
/// these probes; a missing projection or a dropped mask falls far below.
pub const MIN_PROBE_COSINE: f64 = 0.999;

/// How far a served vector's length may stray from the recorded one's (1.0 for a normalised
/// embedding) before the server counts as normalising differently.
const NORM_TOLERANCE: f64 = 1e-3;

/// One probe's text: short in each language, and one past 512 tokens, where a server that drops
/// the attention mask drifts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    ShortEnglish,
    ShortIndonesian,
    Long,
}

impl Probe {
    pub const ALL: [Probe; 3] = [Probe::ShortEnglish, Probe::ShortIndonesian, Probe::Long];

    pub fn name(self) -> &'static str {
        match self {
            Self::ShortEnglish => "short-en",
            Self::ShortIndonesian => "short-id",
            Self::Long => "long",
        }
    }

    /// The text embedded (after the encoder's task prompt, as any message is).
    pub fn text(self) -> String {
        match self {
            Self::ShortEnglish => "Thanks for the quick reply, see you at the meeting tomorrow.".into(),
            Self::ShortIndonesian => "Makasih kak, paketnya sudah sampai dengan selamat.".into(),
            // About 700 tokens, written out by rule so that no file has to carry it.
            Self::Long => (1..=40)
                .map(|i| {
                    format!(
                        "Line {i}: order {} left warehouse {} on day {} and reached the customer in good condition. ",
                        i * 37,
                        i % 7 + 1,
                        i % 28 + 1
                    )
                })
                .collect(),
        }
    }
}

/// The probe texts in [`Probe::ALL`]'s order, for an encoder to embed in one batch.
pub fn probe_texts() -> Vec<String> {
    Probe::ALL.iter().map(|p| p.text()).collect()
}

/// One probe's embedding by the encoder a head was trained on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeEmbedding {
    pub probe: String,
    pub embedding: Vec<f32>,
}

/// The probes' embeddings by one encoder, in [`Probe::ALL`]'s order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EncoderFingerprint(pub Vec<ProbeEmbedding>);

impl EncoderFingerprint {
    /// The fingerprint from embeddings of [`probe_texts`], in that order. Values are kept to
    /// six significant digits: far finer than [`MIN_PROBE_COSINE`] can see, and a head file
    /// stays readable.
    pub fn from_embeddings(embeddings: Vec<Vec<f32>>) -> Self {
        Self(
            Probe::ALL
                .iter()
                .zip(embeddings)
                .map(|(probe, embedding)| ProbeEmbedding {
                    probe: probe.name().to_string(),
                    embedding: embedding.into_iter().map(six_digits).collect(),
                })
                .collect(),
        )
    }

    /// Whether `served` comes from the same encoder as this recorded fingerprint; the reason, with
    /// both figures, when not.
    pub fn check(&self, served: &EncoderFingerprint) -> Result<(), String> {
        for recorded in &self.0 {
            let Some(theirs) = served.0.iter().find(|p| p.probe == recorded.probe) else {
                return Err(format!("no embedding of the {:?} probe", recorded.probe));
            };
            let (ours, theirs) = (&recorded.embedding, &theirs.embedding);
            if ours.len() != theirs.len() {
                return Err(format!(
                    "its embeddings have {} dimensions where the heads were trained on {} (a truncated dimension or another model)",
                    theirs.len(),
                    ours.len()
                ));
            }
            let (norm_ours, norm_theirs) = (norm(ours), norm(theirs));
            if (norm_ours - norm_theirs).abs() > NORM_TOLERANCE {
                return Err(format!(
                    "its {:?} probe embedding has length {norm_theirs:.4} where the heads' encoder gives {norm_ours:.4} (normalised differently)",
                    recorded.probe
                ));
            }
            let cosine = dot(ours, theirs) / (norm_ours * norm_theirs).max(f64::MIN_POSITIVE);
            if cosine < MIN_PROBE_COSINE {
                return Err(format!(
                    "its {:?} probe embedding has cosine {cosine:.4} to the one the heads were trained on, below {MIN_PROBE_COSINE} (another model, missing dense projections, or a different task prompt or attention mask)",
                    recorded.probe
                ));
            }
        }
        Ok(())
    }
}

fn six_digits(x: f32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(5 - (x.abs() as f64).log10().floor() as i32);
    ((x as f64 * scale).round() / scale) as f32
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum()
}

fn norm(a: &[f32]) -> f64 {
    dot(a, a).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u32, len: usize) -> Vec<f32> {
        let raw: Vec<f32> = (0..len)
            .map(|i| (((i as u32 + 1) * (seed * 2 + 7)) % 97) as f32 - 48.0)
            .collect();
        let n = norm(&raw) as f32;
        raw.into_iter().map(|x| x / n).collect()
    }

    fn fingerprint(len: usize) -> EncoderFingerprint {
        EncoderFingerprint::from_embeddings((0..3).map(|s| unit(s, len)).collect())
    }

    #[test]
    fn the_same_encoder_passes_and_each_difference_is_named() {
        let recorded = fingerprint(64);
        assert_eq!(recorded.check(&fingerprint(64)), Ok(()));

        let truncated = fingerprint(32);
        let reason = recorded.check(&truncated).expect_err("fewer dimensions");
        assert!(
            reason.contains("32 dimensions") && reason.contains("64"),
            "{reason}"
        );

        let mut unnormalised = fingerprint(64);
        unnormalised.0[1]
            .embedding
            .iter_mut()
            .for_each(|x| *x *= 3.0);
        let reason = recorded.check(&unnormalised).expect_err("not normalised");
        assert!(
            reason.contains("short-id") && reason.contains("3.0000"),
            "{reason}"
        );

        let mut drifted = fingerprint(64);
        drifted.0[2] = ProbeEmbedding {
            probe: "long".into(),
            embedding: unit(9, 64),
        };
        let reason = recorded.check(&drifted).expect_err("another vector");
        assert!(
            reason.contains("\"long\"") && reason.contains("cosine"),
            "{reason}"
        );
    }

    #[test]
    fn the_long_probe_is_long_and_the_texts_are_fixed() {
        let texts = probe_texts();
        assert_eq!(texts.len(), Probe::ALL.len());
        // Past 512 tokens in any subword vocabulary: well over 2,000 words' worth of characters.
        assert!(texts[2].len() > 3_500, "{}", texts[2].len());
        assert_eq!(texts, probe_texts());
    }

    #[test]
    fn six_digits_keep_the_cosine() {
        let v = unit(3, 768);
        let rounded: Vec<f32> = v.iter().copied().map(six_digits).collect();
        assert!(dot(&v, &rounded) / (norm(&v) * norm(&rounded)) > 0.999_999);
        assert_eq!(six_digits(0.123_456_78), 0.123_457);
    }
}
