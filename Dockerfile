FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir . && useradd --create-home perfmodel && mkdir -p /data && chown perfmodel /data
USER perfmodel
ENV PERFMODEL_SPECS_DIR=/app/hardware_specs PERFMODEL_DATA_DIR=/data
EXPOSE 8000
CMD ["perfmodel", "serve", "--host", "0.0.0.0", "--port", "8000"]
