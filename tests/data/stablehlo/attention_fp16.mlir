module @jit_attention attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x8x512x64xf16>, %arg1: tensor<2x8x512x64xf16>, %arg2: tensor<2x8x512x64xf16>) -> (tensor<2x8x512x64xf16> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3], precision = [DEFAULT, DEFAULT] : (tensor<2x8x512x64xf16>, tensor<2x8x512x64xf16>) -> tensor<2x8x512x512xf16>
    %cst = stablehlo.constant dense<8.000000e+00> : tensor<f16>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f16>) -> tensor<2x8x512x512xf16>
    %2 = stablehlo.divide %0, %1 : tensor<2x8x512x512xf16>
    %cst_0 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %3 = stablehlo.reduce(%2 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<2x8x512x512xf16>, tensor<f16>) -> tensor<2x8x512xf16>
    %cst_1 = stablehlo.constant dense<0xFC00> : tensor<f16>
    %4 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f16>) -> tensor<2x8x512xf16>
    %5 = stablehlo.maximum %4, %3 : tensor<2x8x512xf16>
    %6 = stablehlo.broadcast_in_dim %5, dims = [0, 1, 2] : (tensor<2x8x512xf16>) -> tensor<2x8x512x1xf16>
    %7 = stablehlo.broadcast_in_dim %6, dims = [0, 1, 2, 3] : (tensor<2x8x512x1xf16>) -> tensor<2x8x512x512xf16>
    %8 = stablehlo.subtract %2, %7 : tensor<2x8x512x512xf16>
    %9 = stablehlo.exponential %8 : tensor<2x8x512x512xf16>
    %10 = stablehlo.convert %9 : (tensor<2x8x512x512xf16>) -> tensor<2x8x512x512xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %11 = stablehlo.reduce(%10 init: %cst_2) applies stablehlo.add across dimensions = [3] : (tensor<2x8x512x512xf32>, tensor<f32>) -> tensor<2x8x512xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1, 2] : (tensor<2x8x512xf32>) -> tensor<2x8x512x1xf32>
    %13 = stablehlo.convert %12 : (tensor<2x8x512x1xf32>) -> tensor<2x8x512x1xf16>
    %14 = stablehlo.broadcast_in_dim %13, dims = [0, 1, 2, 3] : (tensor<2x8x512x1xf16>) -> tensor<2x8x512x512xf16>
    %15 = stablehlo.divide %9, %14 : tensor<2x8x512x512xf16>
    %16 = stablehlo.dot_general %15, %arg2, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2], precision = [DEFAULT, DEFAULT] : (tensor<2x8x512x512xf16>, tensor<2x8x512x64xf16>) -> tensor<2x8x512x64xf16>
    return %16 : tensor<2x8x512x64xf16>
  }
}
