module @jit_conv_relu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x64x56x56xf32>, %arg1: tensor<64x64x3x3xf32>, %arg2: tensor<128x64x3x3xf32>) -> (tensor<8x128x27x27xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<8x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<8x64x56x56xf32>
    %1 = call @relu(%0) : (tensor<8x64x56x56xf32>) -> tensor<8x64x56x56xf32>
    %2 = stablehlo.convolution(%1, %arg2) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<8x64x56x56xf32>, tensor<128x64x3x3xf32>) -> tensor<8x128x27x27xf32>
    return %2 : tensor<8x128x27x27xf32>
  }
  func.func private @relu(%arg0: tensor<8x64x56x56xf32>) -> tensor<8x64x56x56xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x64x56x56xf32>
    %1 = stablehlo.maximum %arg0, %0 : tensor<8x64x56x56xf32>
    return %1 : tensor<8x64x56x56xf32>
  }
}
