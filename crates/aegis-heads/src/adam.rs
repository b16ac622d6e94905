//! What the trained parts of a head share: Adam, and an integer generator for starting weights
//! and row orders, so a fit gives the same bits on every CPU (no platform randomness, no `powi`).

/// Adam's running moments for one group of parameters.
pub(crate) struct Adam {
    first: Vec<f32>,
    second: Vec<f32>,
    /// β₁ᵗ and β₂ᵗ, by repeated multiplication (no `powi`, whose rounding is the platform's).
    decay_first: f64,
    decay_second: f64,
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPSILON: f32 = 1e-8;

impl Adam {
    pub(crate) fn new(len: usize) -> Self {
        Self {
            first: vec![0.0; len],
            second: vec![0.0; len],
            decay_first: 1.0,
            decay_second: 1.0,
        }
    }

    pub(crate) fn step(&mut self, params: &mut [f32], gradient: &[f32], rate: f64) {
        self.decay_first *= BETA1;
        self.decay_second *= BETA2;
        let first_correction = (1.0 - self.decay_first) as f32;
        let second_correction = (1.0 - self.decay_second) as f32;
        let (b1, b2) = (BETA1 as f32, BETA2 as f32);
        let rate = rate as f32;
        for (((p, g), m), v) in params
            .iter_mut()
            .zip(gradient)
            .zip(&mut self.first)
            .zip(&mut self.second)
        {
            *m = b1 * *m + (1.0 - b1) * g;
            *v = b2 * *v + (1.0 - b2) * g * g;
            let m_hat = *m / first_correction;
            let v_hat = *v / second_correction;
            *p -= rate * m_hat / (v_hat.sqrt() + EPSILON);
        }
    }
}

/// SplitMix64: small, fast and the same everywhere.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) from the top 24 bits, which f32 holds exactly.
    fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Fisher–Yates: `items` in an order fixed by the generator's state.
    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// Uniform in ±√(3 / width), the variance of the usual 1/√width normal start.
pub(crate) fn starting_weights(len: usize, width: usize, seed: u64) -> Vec<f32> {
    let scale = (3.0 / width as f64).sqrt() as f32;
    let mut generator = SplitMix::new(seed);
    (0..len)
        .map(|_| (generator.unit() * 2.0 - 1.0) * scale)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starting_weights_are_bounded_and_fixed_by_the_seed() {
        let a = starting_weights(1000, 12, 3);
        assert!(a.iter().all(|w| w.abs() <= 0.5 + 1e-6));
        assert_eq!(a, starting_weights(1000, 12, 3));
        assert_ne!(a, starting_weights(1000, 12, 4));
    }

    #[test]
    fn a_shuffle_keeps_every_item_and_depends_only_on_the_seed() {
        let shuffled = |seed| {
            let mut items: Vec<usize> = (0..50).collect();
            SplitMix::new(seed).shuffle(&mut items);
            items
        };
        let mut sorted = shuffled(1);
        assert_ne!(sorted, (0..50).collect::<Vec<_>>());
        assert_eq!(sorted, shuffled(1));
        assert_ne!(sorted, shuffled(2));
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
    }
}
