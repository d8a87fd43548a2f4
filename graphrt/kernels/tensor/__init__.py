"""Shape and data-movement operators: views, constants and Shape/Size, Gather/Scatter,
slicing, Transpose/Concat, Expand/Tile/Pad, tensor creation, NonZero/Unique,
DepthToSpace/SpaceToDepth."""
