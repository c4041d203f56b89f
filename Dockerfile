FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir . && useradd --create-home perfmodel && mkdir -p /data && chown perfmodel /data
# compile the numba kernels into the installed package's cache now (root can write it, the service user cannot;
# from / so the installed package, not /app, is imported)
RUN cd / && PERFMODEL_SPECS_DIR=/app/hardware_specs python -m perfmodel.search.gemm_kernel
USER perfmodel
ENV PERFMODEL_SPECS_DIR=/app/hardware_specs PERFMODEL_DATA_DIR=/data
EXPOSE 8000
CMD ["perfmodel", "serve", "--host", "0.0.0.0", "--port", "8000"]
