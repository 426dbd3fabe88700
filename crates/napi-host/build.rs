//! Build script: emits the link arguments a Node-API addon needs.
fn main() {
    napi_build::setup();
}
