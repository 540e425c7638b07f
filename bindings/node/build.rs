//! Sets the linker flags a Node-API addon needs (symbols resolved by the host `node` at load).
fn main() {
    napi_build::setup();
}
