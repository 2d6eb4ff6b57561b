fn main() {
    let conn = ta_demo_server::database();
    let path = std::env::args().nth(1).expect("path");
    let _ = std::fs::remove_file(&path);
    conn.execute("VACUUM INTO ?1", [&path]).unwrap();
}
