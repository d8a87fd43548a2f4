"""Neural-network operators: convolutions and their window geometry, pooling,
normalisations, Softmax, resampling (Resize, GridSample, RoiAlign), LRN, NMS, losses, Dropout."""
