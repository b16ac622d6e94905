//! `--out-of-fold` (lab builds): rows whose embeddings a cross-fit run wrote, read in place of
//! the loaded encoder's.

use aegis_guard::LayerSearch;
use anyhow::Result;

use super::arguments::TrainArgs;

/// Rows whose embeddings a file gives instead of the loaded encoder: `aegis adapt --cross-fit`'s
/// out-of-fold embeddings (`--out-of-fold`, in lab builds).
pub(super) trait EmbeddingsOfRows {
    /// The settings of the run that wrote them, recorded in the head.
    fn run(&self) -> &str;
    fn get(&self, text: &str) -> Option<&[f32]>;
}

#[cfg(feature = "lab")]
impl EmbeddingsOfRows for aegis_adapt::OutOfFold {
    fn run(&self) -> &str {
        &self.run
    }
    fn get(&self, text: &str) -> Option<&[f32]> {
        aegis_adapt::OutOfFold::get(self, text)
    }
}

/// The out-of-fold embeddings `--out-of-fold` names, where heads can use them: on an adapted
/// encoder's embedding alone (the file holds nothing else).
#[cfg(feature = "lab")]
pub(super) fn out_of_fold_for(
    args: &TrainArgs,
    search: &LayerSearch,
    on_encoder: bool,
) -> Result<Option<Box<dyn EmbeddingsOfRows>>> {
    let Some(path) = &args.out_of_fold else {
        return Ok(None);
    };
    anyhow::ensure!(
        on_encoder && search.candidates.iter().all(Vec::is_empty) && !args.prompt_scores,
        "--out-of-fold holds the encoder's embedding only: train with --layers embedding on the encoder, without --prompt-scores"
    );
    let adapter = aegis_teach::adapter_path(&args.guard.prompts_dir()?);
    anyhow::ensure!(
        adapter.exists(),
        "--out-of-fold embeddings are an adapter's, and {} holds none: apply the adapter trained with the same settings first",
        adapter.display()
    );
    Ok(Some(Box::new(aegis_adapt::OutOfFold::read(path)?)))
}

/// Without the lab feature there is no `--out-of-fold`: every row goes through the encoder.
#[cfg(not(feature = "lab"))]
pub(super) fn out_of_fold_for(
    _: &TrainArgs,
    _: &LayerSearch,
    _: bool,
) -> Result<Option<Box<dyn EmbeddingsOfRows>>> {
    Ok(None)
}
