// The Python package and its pinned requirements are embedded in the binary (see src/env.rs);
// rebuild when they change.
fn main() {
    println!("cargo:rerun-if-changed=../../python/train_agent");
    println!("cargo:rerun-if-changed=../../python/requirements.txt");
}
