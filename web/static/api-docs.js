// Starts Swagger UI (/docs) or Redoc (/redoc) from a static file: the pages' Content-Security-Policy allows no
// inline script. The OpenAPI URL comes from the container's data-openapi-url attribute.
window.addEventListener("DOMContentLoaded", function () {
  var swagger = document.getElementById("swagger-ui");
  if (swagger) {
    window.ui = SwaggerUIBundle({
      url: swagger.dataset.openapiUrl,
      dom_id: "#swagger-ui",
      deepLinking: true,
      presets: [SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
    });
  }
  var redoc = document.getElementById("redoc");
  if (redoc) {
    Redoc.init(redoc.dataset.openapiUrl, {}, redoc);
  }
});
