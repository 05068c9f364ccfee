"""The artifacts room: exported ``paddle.jit.save`` models, their manifests, and the object stores.

Modules: :mod:`.manifest` (export discovery and the sha256 manifest), :mod:`.transfer` (upload,
download, list), :mod:`.model_upload` (the one upload sequence of the task and the pipeline),
:mod:`.storage` (the store interface and its file:// and s3:// implementations), :mod:`.program`
(an export's inputs, read from its program file), :mod:`.runtime` (the Paddle an image declares),
:mod:`.check` (the export loaded in the runtime image against its references), :mod:`.onnx`
(paddle2onnx in the image, ONNX Runtime parity here), :mod:`.signature` (OpenSSF Model Signing,
``model.sig``), :mod:`.show` (one stored version for a person or a script), :mod:`.gate` (the
models of ``release.models`` checked in a candidate image), :mod:`.scratch` (a check's
containers and scratch folders, cleared of killed checks' leftovers).
"""
