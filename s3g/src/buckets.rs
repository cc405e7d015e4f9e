//! Bucket operations: buckets of the S3 volume, created with S3's name rules; the volume
//! itself is created on the first CreateBucket.

use s3s::dto::*;
use s3s::{S3Request, S3Result};

use crate::core::{volume_missing, Gateway};
use crate::mapping::{bucket_name, s3_error, timestamp};

pub async fn list_buckets(
    g: &Gateway,
    _req: S3Request<ListBucketsInput>,
) -> S3Result<ListBucketsOutput> {
    let buckets = match g.client.om.list_buckets(&g.volume, "").await {
        Ok(b) => b,
        Err(e) if volume_missing(&e) => Vec::new(),
        Err(e) => return Err(s3_error(e)),
    };
    Ok(ListBucketsOutput {
        buckets: Some(
            buckets
                .into_iter()
                .map(|b| Bucket {
                    name: Some(b.name),
                    creation_date: Some(timestamp(b.created_ms)),
                    bucket_region: None,
                })
                .collect(),
        ),
        owner: Some(Owner {
            display_name: Some("rozone".into()),
            id: Some("rozone".into()),
        }),
        ..Default::default()
    })
}

pub async fn create_bucket(
    g: &Gateway,
    req: S3Request<CreateBucketInput>,
) -> S3Result<CreateBucketOutput> {
    let name = &req.input.bucket;
    bucket_name(name)?;
    g.ensure_volume().await?;
    g.client
        .om
        .create_bucket(&g.volume, name, None)
        .await
        .map_err(s3_error)?;
    Ok(CreateBucketOutput {
        location: Some(format!("/{name}")),
    })
}

pub async fn head_bucket(
    g: &Gateway,
    req: S3Request<HeadBucketInput>,
) -> S3Result<HeadBucketOutput> {
    bucket_name(&req.input.bucket)?;
    g.client
        .om
        .bucket_info(&g.volume, &req.input.bucket, Default::default())
        .await
        .map_err(s3_error)?;
    Ok(HeadBucketOutput::default())
}

pub async fn delete_bucket(
    g: &Gateway,
    req: S3Request<DeleteBucketInput>,
) -> S3Result<DeleteBucketOutput> {
    bucket_name(&req.input.bucket)?;
    // Uploads in progress hold blocks the bucket's deletion would strand.
    let (uploads, _) = g
        .client
        .om
        .list_multipart_uploads(&g.volume, &req.input.bucket, "", "", "", 1)
        .await
        .map_err(s3_error)?;
    if !uploads.is_empty() {
        return Err(s3s::s3_error!(
            BucketNotEmpty,
            "the bucket has multipart uploads in progress: complete or abort them first"
        ));
    }
    g.client
        .om
        .delete_bucket(&g.volume, &req.input.bucket)
        .await
        .map_err(s3_error)?;
    Ok(DeleteBucketOutput::default())
}
