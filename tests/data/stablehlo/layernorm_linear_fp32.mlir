module @jit_layernorm_linear attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<512x768xf32>, %arg1: tensor<768xf32>, %arg2: tensor<768x3072xf32>) -> (tensor<512x3072xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<512x768xf32>, tensor<f32>) -> tensor<512xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<512xf32>) -> tensor<512x1xf32>
    %cst_0 = stablehlo.constant dense<7.680000e+02> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<512x1xf32>
    %3 = stablehlo.divide %1, %2 : tensor<512x1xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<512x1xf32>) -> tensor<512x768xf32>
    %5 = stablehlo.subtract %arg0, %4 : tensor<512x768xf32>
    %6 = stablehlo.multiply %5, %5 : tensor<512x768xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.reduce(%6 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<512x768xf32>, tensor<f32>) -> tensor<512xf32>
    %8 = stablehlo.broadcast_in_dim %7, dims = [0] : (tensor<512xf32>) -> tensor<512x1xf32>
    %cst_2 = stablehlo.constant dense<7.680000e+02> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<512x1xf32>
    %10 = stablehlo.divide %8, %9 : tensor<512x1xf32>
    %11 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<512x1xf32>) -> tensor<512x768xf32>
    %12 = stablehlo.subtract %arg0, %11 : tensor<512x768xf32>
    %cst_3 = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
    %13 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<512x1xf32>
    %14 = stablehlo.add %10, %13 : tensor<512x1xf32>
    %15 = stablehlo.rsqrt %14 : tensor<512x1xf32>
    %16 = stablehlo.broadcast_in_dim %15, dims = [0, 1] : (tensor<512x1xf32>) -> tensor<512x768xf32>
    %17 = stablehlo.multiply %12, %16 : tensor<512x768xf32>
    %18 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<768xf32>) -> tensor<1x768xf32>
    %19 = stablehlo.broadcast_in_dim %18, dims = [0, 1] : (tensor<1x768xf32>) -> tensor<512x768xf32>
    %20 = stablehlo.multiply %17, %19 : tensor<512x768xf32>
    %21 = stablehlo.dot_general %20, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<512x768xf32>, tensor<768x3072xf32>) -> tensor<512x3072xf32>
    return %21 : tensor<512x3072xf32>
  }
}
