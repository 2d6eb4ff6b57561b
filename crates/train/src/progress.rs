//! What a run shows at the terminal while its progress bars are up.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Prints a line above the progress bars, or plainly when they are hidden (not a terminal).
pub(crate) fn say(multi: &MultiProgress, line: String) {
    if multi.is_hidden() {
        eprintln!("{line}");
    } else {
        multi.println(line).ok();
    }
}

/// The run's bar of steps, `done` of `total` already done.
pub(crate) fn steps_bar(multi: &MultiProgress, total: u64, done: u64) -> ProgressBar {
    let bar = multi.add(ProgressBar::new(total));
    bar.set_style(ProgressStyle::with_template("{prefix:>10} [{bar:30}] {pos}/{len} steps ({elapsed}, eta {eta})").expect("template").progress_chars("=> "));
    bar.set_prefix("train");
    bar.set_position(done);
    bar
}
