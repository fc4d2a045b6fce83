//! Repetitions as a spread: every benchmark that repeats a measurement (`--repeat N`,
//! implementations interleaved) reports the median and, beside it, the smallest and the
//! largest repetition, so that a ratio of 0.9x whose repetitions ran from 0.4x to 1.6x is not
//! read as a result.

/// The smallest, median and largest of a set of repetitions.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    /// The smallest repetition.
    pub min: f64,
    /// The median (the upper one of an even count).
    pub median: f64,
    /// The largest repetition.
    pub max: f64,
    /// How many repetitions.
    pub count: usize,
}

impl Spread {
    /// The spread of `xs`; `None` when there is none.
    pub fn of(xs: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        Some(Spread { min: *v.first()?, median: v[v.len() / 2], max: *v.last()?, count: v.len() })
    }

    /// The spread of the ratios `num[i] / den[i]` of repetitions measured side by side
    /// (repetition `i` of both at about the same time); pairs with a zero denominator are
    /// left out.
    pub fn of_ratios(num: &[f64], den: &[f64]) -> Option<Spread> {
        let r: Vec<f64> =
            num.iter().zip(den).filter(|(_, &d)| d > 0.0).map(|(&n, &d)| n / d).collect();
        Spread::of(&r)
    }

    /// `1.23x` for one repetition, `1.23x (1.10-1.31)` for several: the median ratio and the
    /// range of the repetitions'.
    pub fn ratio_text(&self) -> String {
        if self.count > 1 {
            format!("{:.2}x ({:.2}-{:.2})", self.median, self.min, self.max)
        } else {
            format!("{:.2}x", self.median)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_takes_min_median_max_and_skips_nan() {
        let s = Spread::of(&[3.0, f64::NAN, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.count), (1.0, 2.0, 3.0, 3));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[4.0, 1.0]).unwrap().median, 4.0, "upper median of two");
    }

    #[test]
    fn ratios_pair_repetitions_and_print_their_range() {
        let s = Spread::of_ratios(&[2.0, 3.0, 8.0], &[1.0, 0.0, 4.0]).unwrap();
        assert_eq!((s.min, s.max, s.count), (2.0, 2.0, 2), "the zero denominator is left out");
        assert_eq!(
            Spread::of_ratios(&[1.0, 3.0], &[2.0, 2.0]).unwrap().ratio_text(),
            "1.50x (0.50-1.50)"
        );
        assert_eq!(Spread::of(&[0.5]).unwrap().ratio_text(), "0.50x");
    }
}
