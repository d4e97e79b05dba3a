pub mod gltf;
