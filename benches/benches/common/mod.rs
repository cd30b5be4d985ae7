//! Criterion settings shared by the bench targets.

use std::time::Duration;

use criterion::{BenchmarkGroup, SamplingMode, measurement::WallTime};

/// Reduced settings, so that the whole suite runs in about five minutes on
/// 2 cores: 1 s warm-up; below 10^4, 50 samples over 3 s; from 10^4 on,
/// criterion's flat sampling with 20 samples over at least 5 s (each sample
/// is one or more whole runs of many milliseconds, far above timer
/// resolution, and the median of 20 resists a neighbour's compile burst).
pub fn size_settings(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
    group.warm_up_time(Duration::from_secs(1));
    if n >= 10_000 {
        group.sampling_mode(SamplingMode::Flat);
        group.sample_size(20);
        group.measurement_time(Duration::from_secs(5));
    } else {
        group.sampling_mode(SamplingMode::Auto);
        group.sample_size(50);
        group.measurement_time(Duration::from_secs(3));
    }
}
