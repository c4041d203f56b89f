module @jit_mlp attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<256x1024xbf16>, %arg1: tensor<1024x4096xbf16>, %arg2: tensor<4096x1024xbf16>) -> (tensor<256x1024xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x1024xbf16>, tensor<1024x4096xbf16>) -> tensor<256x4096xbf16>
    %1 = stablehlo.multiply %0, %0 : tensor<256x4096xbf16>
    %2 = stablehlo.multiply %1, %0 : tensor<256x4096xbf16>
    %cst = stablehlo.constant dense<4.467770e-02> : tensor<bf16>
    %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<256x4096xbf16>
    %4 = stablehlo.multiply %3, %2 : tensor<256x4096xbf16>
    %5 = stablehlo.add %0, %4 : tensor<256x4096xbf16>
    %cst_0 = stablehlo.constant dense<7.968750e-01> : tensor<bf16>
    %6 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<bf16>) -> tensor<256x4096xbf16>
    %7 = stablehlo.multiply %6, %5 : tensor<256x4096xbf16>
    %8 = stablehlo.tanh %7 : tensor<256x4096xbf16>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<256x4096xbf16>
    %10 = stablehlo.add %9, %8 : tensor<256x4096xbf16>
    %cst_2 = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %11 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<bf16>) -> tensor<256x4096xbf16>
    %12 = stablehlo.multiply %11, %10 : tensor<256x4096xbf16>
    %13 = stablehlo.multiply %0, %12 : tensor<256x4096xbf16>
    %14 = stablehlo.dot_general %13, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<256x1024xbf16>
    %cst_3 = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %15 = stablehlo.reduce(%14 init: %cst_3) applies stablehlo.maximum across dimensions = [1] : (tensor<256x1024xbf16>, tensor<bf16>) -> tensor<256xbf16>
    %cst_4 = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %16 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<bf16>) -> tensor<256xbf16>
    %17 = stablehlo.maximum %16, %15 : tensor<256xbf16>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0] : (tensor<256xbf16>) -> tensor<256x1xbf16>
    %19 = stablehlo.broadcast_in_dim %18, dims = [0, 1] : (tensor<256x1xbf16>) -> tensor<256x1024xbf16>
    %20 = stablehlo.subtract %14, %19 : tensor<256x1024xbf16>
    %21 = stablehlo.exponential %20 : tensor<256x1024xbf16>
    %22 = stablehlo.convert %21 : (tensor<256x1024xbf16>) -> tensor<256x1024xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %23 = stablehlo.reduce(%22 init: %cst_5) applies stablehlo.add across dimensions = [1] : (tensor<256x1024xf32>, tensor<f32>) -> tensor<256xf32>
    %24 = stablehlo.broadcast_in_dim %23, dims = [0] : (tensor<256xf32>) -> tensor<256x1xf32>
    %25 = stablehlo.convert %24 : (tensor<256x1xf32>) -> tensor<256x1xbf16>
    %26 = stablehlo.broadcast_in_dim %25, dims = [0, 1] : (tensor<256x1xbf16>) -> tensor<256x1024xbf16>
    %27 = stablehlo.divide %21, %26 : tensor<256x1024xbf16>
    return %27 : tensor<256x1024xbf16>
  }
}
