//! [`Gateway`]: the `s3s::S3` implementation. Each operation is a function of
//! [`crate::buckets`], [`crate::objects`], [`crate::copy`], [`crate::multipart`] or
//! [`crate::list`]; this file only routes and
//! counts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rozone_client::Client;
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::mapping::{om_code, s3_error};

/// Requests and failures, for `/metrics`.
#[derive(Debug, Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

impl Metrics {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

/// What every operation needs.
pub struct Gateway {
    pub client: Arc<Client>,
    /// The volume the S3 buckets live in.
    pub volume: String,
    pub max_object_size: u64,
    pub metrics: Arc<Metrics>,
    volume_ready: AtomicBool,
}

impl Gateway {
    pub fn new(
        client: Arc<Client>,
        volume: String,
        max_object_size: u64,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            client,
            volume,
            max_object_size,
            metrics,
            volume_ready: AtomicBool::new(false),
        }
    }

    /// Creates the S3 volume the first time a bucket is created.
    pub async fn ensure_volume(&self) -> S3Result<()> {
        if self.volume_ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        match self
            .client
            .om
            .create_volume(&self.volume, "s3g", None)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_already_exists() => {}
            Err(e) => return Err(s3_error(e)),
        }
        self.volume_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Counts a request and, when it failed, the failure.
    fn count<T>(&self, r: S3Result<T>) -> S3Result<T> {
        Metrics::add(&self.metrics.requests, 1);
        if r.is_err() {
            Metrics::add(&self.metrics.errors, 1);
        }
        r
    }
}

/// True when `e` says the volume is missing (no bucket was ever created).
pub fn volume_missing(e: &rozone_client::ClientError) -> bool {
    om_code(e) == Some(rozone_types::codes::OmErrorCode::VolumeNotFound)
}

macro_rules! route {
    ($($method:ident($input:ty) -> $output:ty => $f:path;)*) => {
        #[async_trait::async_trait]
        impl S3 for Gateway {
            $(
                async fn $method(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.count($f(self, req).await.map(S3Response::new))
                }
            )*
        }
    };
}

route! {
    list_buckets(ListBucketsInput) -> ListBucketsOutput => crate::buckets::list_buckets;
    create_bucket(CreateBucketInput) -> CreateBucketOutput => crate::buckets::create_bucket;
    head_bucket(HeadBucketInput) -> HeadBucketOutput => crate::buckets::head_bucket;
    delete_bucket(DeleteBucketInput) -> DeleteBucketOutput => crate::buckets::delete_bucket;
    put_object(PutObjectInput) -> PutObjectOutput => crate::objects::put_object;
    get_object(GetObjectInput) -> GetObjectOutput => crate::objects::get_object;
    head_object(HeadObjectInput) -> HeadObjectOutput => crate::objects::head_object;
    delete_object(DeleteObjectInput) -> DeleteObjectOutput => crate::objects::delete_object;
    delete_objects(DeleteObjectsInput) -> DeleteObjectsOutput => crate::objects::delete_objects;
    copy_object(CopyObjectInput) -> CopyObjectOutput => crate::copy::copy_object;
    create_multipart_upload(CreateMultipartUploadInput) -> CreateMultipartUploadOutput => crate::multipart::create_multipart_upload;
    upload_part(UploadPartInput) -> UploadPartOutput => crate::multipart::upload_part;
    upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput => crate::copy::upload_part_copy;
    complete_multipart_upload(CompleteMultipartUploadInput) -> CompleteMultipartUploadOutput => crate::multipart::complete_multipart_upload;
    abort_multipart_upload(AbortMultipartUploadInput) -> AbortMultipartUploadOutput => crate::multipart::abort_multipart_upload;
    list_parts(ListPartsInput) -> ListPartsOutput => crate::multipart::list_parts;
    list_multipart_uploads(ListMultipartUploadsInput) -> ListMultipartUploadsOutput => crate::multipart::list_multipart_uploads;
    list_objects_v2(ListObjectsV2Input) -> ListObjectsV2Output => crate::list::list_objects_v2;
    list_objects(ListObjectsInput) -> ListObjectsOutput => crate::list::list_objects;
}
