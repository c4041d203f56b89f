FROM python:3.11-slim
WORKDIR /app
COPY . /app
RUN pip install --no-cache-dir .
ENV PERFMODEL_SPECS_DIR=/app/hardware_specs
CMD ["perfmodel", "demo"]
