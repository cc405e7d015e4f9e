//! The `s3s::S3` implementation for [`Gateway`]: each operation is a function of
//! [`crate::buckets`], [`crate::objects`], [`crate::copy`], [`crate::multipart`] or
//! [`crate::list`]; this file only routes and counts. What the operations share lives in
//! [`crate::core`].

use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, S3};

use crate::core::Gateway;

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
