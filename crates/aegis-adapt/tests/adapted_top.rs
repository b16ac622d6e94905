//! The trainable top against the real encoder: with its updates at zero it is the encoder, and
//! its gradients are the function's (finite differences).

use std::sync::OnceLock;

use aegis_adapt::{AdaptedTop, AdapterShape, Products};
use aegis_engine::{
    default_encoder_dir, DeviceChoice, EmbeddingGemma, EncoderArithmetic, Projection,
    SentenceEncoder, SplitMix64,
};
use candle_core::{Device, Tensor};

const TEXTS: [&str; 3] = [
    "You are an idiot and everyone knows it.",
    "Someone at work keeps calling me an \"idiot\" in meetings. Who should I tell?",
    "anjing saya sakit, harus dibawa ke dokter hewan mana?",
];

fn exact() -> &'static EmbeddingGemma {
    static ENCODER: OnceLock<EmbeddingGemma> = OnceLock::new();
    ENCODER.get_or_init(|| {
        EmbeddingGemma::load_with(
            &default_encoder_dir(),
            DeviceChoice::Cpu,
            EncoderArithmetic::Exact,
        )
        .unwrap_or_else(|e| {
            panic!("EmbeddingGemma must be set up for the tests (scripts/setup-encoder.sh): {e}")
        })
    })
}

fn top(first_layer: usize) -> AdaptedTop {
    let shape = AdapterShape {
        first_layer,
        rank: 4,
        alpha: 8.0,
        projections: Projection::ALL.to_vec(),
    };
    AdaptedTop::new(exact(), shape, Products::Exact, 512, 7).expect("the top builds")
}

/// The texts' states after `after` layers, joined, and each text's length.
fn states(after: usize) -> (Tensor, Vec<usize>) {
    let states: Vec<Tensor> = exact()
        .token_states(&TEXTS, after)
        .into_iter()
        .map(|s| s.expect("states read"))
        .collect();
    let lengths = states.iter().map(|s| s.dims()[0]).collect();
    (Tensor::cat(&states, 0).expect("joined"), lengths)
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn with_its_updates_at_zero_the_top_is_the_encoder() {
    let (input, lengths) = states(20);
    let got: Vec<Vec<f32>> = top(20)
        .forward(&input, &lengths)
        .expect("forward")
        .to_vec2()
        .expect("rows");
    let want = exact().embed_batch(&TEXTS);
    for (got, want) in got.iter().zip(want) {
        let want = want.expect("embedded");
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst < 1e-5, "largest difference {worst}");
    }
}

#[test]
#[cfg_attr(
    not(aegis_models),
    ignore = "needs the default model and encoder: scripts/setup-model.sh, scripts/setup-encoder.sh"
)]
fn gradients_of_the_updates_match_finite_differences() {
    let top = top(22);
    let (input, lengths) = states(22);
    // A fixed direction through the embeddings: the loss is their projection on it.
    let direction: Vec<f32> = (0..top.output_dimensions())
        .map(|i| ((i * 7919) % 13) as f32 / 13.0 - 0.5)
        .collect();
    let direction =
        Tensor::from_vec(direction, (top.output_dimensions(), 1), &Device::Cpu).expect("direction");
    let loss = |top: &AdaptedTop| -> Tensor {
        top.forward(&input, &lengths)
            .and_then(|e| Ok(e.matmul(&direction)?.sum_all()?))
            .expect("loss")
    };
    let vars = top.vars();
    // Away from zero, so both halves of each update carry a gradient.
    let mut random = SplitMix64::new(3);
    for var in &vars {
        let noise: Vec<f32> = (0..var.elem_count())
            .map(|_| random.next_symmetric() * 0.03)
            .collect();
        let noise = Tensor::from_vec(noise, var.dims(), &Device::Cpu).expect("noise");
        var.set(&(var.as_tensor() + noise).expect("sum"))
            .expect("set");
    }
    let grads = loss(&top).backward().expect("backward");
    let step = 1e-2f32;
    for var in [&vars[0], &vars[1], &vars[vars.len() - 1]] {
        let grad = grads.get(var).expect("a gradient for every update");
        let flat: Vec<f32> = grad.flatten_all().expect("flat").to_vec1().expect("values");
        // The element with the largest gradient, where the difference is far above rounding.
        let (at, &analytic) = flat
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
            .expect("non-empty");
        let original: Vec<f32> = var
            .as_tensor()
            .flatten_all()
            .and_then(|t| t.to_vec1())
            .expect("values");
        let set = |values: Vec<f32>| {
            var.set(&Tensor::from_vec(values, var.dims(), &Device::Cpu).expect("t"))
                .expect("set")
        };
        let nudged = |delta: f32| {
            let mut values = original.clone();
            values[at] += delta;
            set(values);
            let value = loss(&top).to_scalar::<f32>().expect("scalar");
            set(original.clone());
            value
        };
        let numeric = (nudged(step) - nudged(-step)) / (2.0 * step);
        let relative = (numeric - analytic).abs() / analytic.abs().max(1e-6);
        assert!(
            relative < 0.02,
            "analytic {analytic}, finite difference {numeric}"
        );
    }
}
